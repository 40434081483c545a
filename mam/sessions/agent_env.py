"""What a session's agent must not inherit: mam's secrets (broker password, dispatch secret, tokens).

The agent's own `mam event` reads what it needs from the workspace (`.mam.env`, the 0600 job
record, the embedded broker's password file), so nothing secret has to sit in its environment,
where a printed `env` would put it on screen and in the conversation.
"""

from __future__ import annotations

from collections.abc import Mapping

from mam.settings import is_secret_name


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not is_secret_name(k)}
