"""The embedded broker's authentication: one username and the workspace's random password.

An amqtt plugin, loaded only in the broker process (`mam.broker.serve`). It compares the CONNECT's
username and password with `hmac.compare_digest`: amqtt's own password-file plugin hashes every
attempt with argon2 (~180 ms per CONNECT), which every `mam event` would pay. A random 256-bit
password needs no slow hash. Anonymous clients and wrong credentials are refused at CONNECT.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amqtt.plugins.base import BaseAuthPlugin

from mam.broker.credentials import read_password


class WorkspaceAuthPlugin(BaseAuthPlugin):  # type: ignore[misc]  # amqtt ships no type information
    @dataclass
    class Config:
        username: str = ""
        password_file: str = ""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        # Read once at start: a broker keeps the password it started with.
        self._username = self.config.username.encode("utf-8")
        self._password = read_password(Path(self.config.password_file)).encode("utf-8")
        if not self._username or not self._password:
            raise ValueError(f"no username or no password in {self.config.password_file!r}: refusing to run open")

    async def authenticate(self, *, session: Any) -> bool:
        username = (getattr(session, "username", None) or "").encode("utf-8")
        password = getattr(session, "password", None) or ""
        password_bytes = password.encode("utf-8") if isinstance(password, str) else bytes(password)
        # Both compared, always: the answer takes the same time whichever is wrong.
        user_ok = hmac.compare_digest(username, self._username)
        password_ok = hmac.compare_digest(password_bytes, self._password)
        return user_ok and password_ok
