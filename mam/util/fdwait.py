"""Wait until file descriptors are readable, whatever their number.

`select.select` refuses descriptors of 1024 and more (FD_SETSIZE), which one process reaches with
a few hundred wrappers in threads (the MCP server, a loop, bench/scale.py at 500 sessions): poll
has no such limit. Lean: the agent-side `mam event` path and the heartbeater use it too.
"""

from __future__ import annotations

import math
import select

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

_READY = select.POLLIN | select.POLLPRI


def readable(fds: Sequence[int], timeout: float | None) -> list[int]:
    """Those of `fds` that are readable (or hung up, or in error) within `timeout` seconds (None: no limit)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, _READY)
    ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
    return [fd for fd, events in poller.poll(ms) if events]
