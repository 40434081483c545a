"""The wake socket: how `mam event` tells the waiting wrapper of a local job that an event is on disk.

The wrapper of a local job (its Intake, mam/jobs/intake.py) binds a Unix datagram socket
`.mam/run/wake-<job>.sock` (mode 0600, in the 0700 folder `.mam/run/`); after committing an event
to the store, the agent's `mam event` sends one datagram to it, and the wrapper reads the store
(the disk path) and relays the signed event to MQTT. A datagram carries nothing but the wake-up:
the wrapper trusts no byte of it (the event itself is read from the store and checked by the
gate, signature first), so a forged wake costs one read.

Either side refuses a socket or folder another user owns or may write (Guarantee 13): the sender
then reports "no wrapper listens" and the caller falls back to publishing itself.
"""

from __future__ import annotations

import _socket  # not `socket`: its enum set-up costs `mam event` a millisecond or two
import os
import stat

from mam.ids import check_job_id
from mam.util import pokefifo
from mam.util.private import address, check_folder, private

__all__ = ["ABSENT", "address", "check_folder", "path", "private", "send"]

ABSENT = "no wrapper listens"


def path(run_dir: str, job_id: str) -> str:
    """The wake socket of `job_id` in `run_dir` (the workspace's `.mam/run`)."""
    return os.path.join(run_dir, f"wake-{check_job_id(job_id)}.sock")


def send(run_dir: str, job_id: str) -> str:
    """Wake the wrapper waiting for `job_id`: '' if a wrapper's socket took the datagram, else why not.

    When no wrapper listens (it was interrupted, or died), the job's key of mam.util.pokes is poked
    instead: whoever waits on that job from outside (the next job of its session, `mam job wait`)
    reads its stored events at once rather than on its slow clock."""
    problem = _send(run_dir, job_id)
    if problem == ABSENT:
        pokefifo.poke(os.path.join(run_dir, "wake"), [pokefifo.job_key(job_id)])  # mam.util.pokes.folder
    return problem


def _send(run_dir: str, job_id: str) -> str:
    target = path(run_dir, job_id)
    problem = check_folder(run_dir)
    if problem:
        return ABSENT if problem.endswith("No such file or directory") else problem
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return ABSENT
    except OSError as e:
        return f"{target}: {e.strerror}"
    if not stat.S_ISSOCK(st.st_mode) or not private(st):
        return f"refusing wake socket {target}: not a socket of this user with mode 0600"
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM | _socket.SOCK_NONBLOCK | _socket.SOCK_CLOEXEC)
    fd = -1
    try:
        where, fd = address(target)
        sock.sendto(b"w", where)
    except BlockingIOError:
        return ""  # its queue is full of wake-ups already: it reads the store before it sleeps again
    except (ConnectionRefusedError, FileNotFoundError):
        return ABSENT  # a socket file left by a wrapper that died
    except OSError as e:
        return f"cannot wake the wrapper: {e.strerror or e}"
    finally:
        sock.close()
        if fd >= 0:
            os.close(fd)
    return ""
