"""The file protocol of mam.util.pokes (its docstring describes it) over plain paths and built-in
modules only; mam.util.pokes builds its Waiter and poke on it, so the protocol has one implementation.

Only this user's FIFOs in a folder only this user may use count (Guarantee 13): a waiter refuses to
listen in a folder another user owns or may enter or write, and a poke writes nothing into such a
folder nor into anything but a FIFO of this user, so no other user can hear a job's pokes, steal
them (the emitter would take it that a wrapper listened) or plant what a poke writes to.
"""

from __future__ import annotations

import errno
import os
import stat

from mam.util.fdwait import readable
from mam.util.private import check_folder

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

try:
    from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]  # Python 3.11
except ImportError:  # Python 3.12 on
    from _sha2 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]


def job_key(job_id: str) -> str:
    """The key whose FIFOs are poked when the job's row changes (the other keys are in mam.util.pokes)."""
    return f"job:{job_id}"


def stem(key: str) -> str:
    """The first part of a FIFO's name for `key` (hashlib.sha256's hex digest, from the built-in module)."""
    return str(sha256(key.encode("utf-8")).hexdigest())[:20]


class Fifo:
    """One FIFO in `folder` listening to `keys`; `wait(timeout)` returns when poked (True) or at the timeout (False)."""

    def __init__(self, folder: str, keys: Iterable[str]) -> None:
        self.fd = -1
        self.names: list[str] = []
        os.makedirs(folder, mode=0o700, exist_ok=True)
        problem = check_folder(folder)
        if problem:
            raise PermissionError(f"refusing to listen for pokes: {problem}")
        self.folder = folder
        tag = f"{os.getpid()}.{os.urandom(6).hex()}"
        tmp = os.path.join(folder, f".new.{tag}")
        os.mkfifo(tmp, 0o600)
        # Open before it is visible under a key's name: a poker finding no reader removes the name.
        self.fd = os.open(tmp, os.O_RDWR | os.O_NONBLOCK)
        try:
            for key in dict.fromkeys(keys):
                name = os.path.join(folder, f"{stem(key)}.{tag}")
                os.link(tmp, name)
                self.names.append(name)
        except BaseException:
            self.close()
            raise
        finally:
            os.unlink(tmp)

    def wait(self, timeout: float | None) -> bool:
        """Block until a poke or `timeout` seconds (None: no limit); drain what is pending."""
        ready = readable([self.fd], timeout)
        if not ready:
            return False
        self.drain()
        return True

    def drain(self) -> None:
        try:
            while os.read(self.fd, 512):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        for name in self.names:
            try:
                os.unlink(name)
            except OSError:
                pass
        self.names = []
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def poke(folder: str, keys: Iterable[str]) -> int:
    """Wake every FIFO in `folder` listening to one of `keys`; how many live waiters were poked (0: nobody
    listens, or the folder is not private). Never blocks, never raises."""
    stems = {stem(k) for k in keys}
    if check_folder(folder):
        return 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    poked = 0
    for entry in entries:
        if entry.name.split(".", 1)[0] not in stems:
            continue
        try:
            fd = os.open(entry.path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError as e:
            if e.errno == errno.ENXIO:  # nobody has it open: its waiter is gone
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISFIFO(st.st_mode) and st.st_uid == os.geteuid():  # never write into anything else
                os.write(fd, b"\0")
                poked += 1
        except BlockingIOError:
            poked += 1  # full: a wake-up is pending already
        except OSError:
            pass
        finally:
            os.close(fd)
    return poked
