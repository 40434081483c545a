"""The key a remote job's events are signed with, derived on both hosts, never sent.

job key = lower-case hex of HMAC-SHA256(MAM_DISPATCH_SECRET, "mam-job-key\\n" + job id + "\\n" + key nonce)

The origin picks a fresh key nonce per job and sends it, with the job id, in clear in the
dispatch; the runner derives the same 64 hex characters from its own copy of the secret. A
reader of the broker sees the nonce and the id but, without the secret, cannot compute the key.
See MESSAGING.md, "Remote runners".
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

KEY_NONCE = re.compile(r"[0-9a-f]{32}\Z")
_LABEL = b"mam-job-key\n"


def new_key_nonce() -> str:
    return secrets.token_hex(16)


def job_key(secret: str, job_id: str, key_nonce: str) -> str:
    """The job's token: what `mam event`, the runner and the origin sign and check its events with."""
    message = _LABEL + job_id.encode("utf-8") + b"\n" + key_nonce.encode("utf-8")
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()
