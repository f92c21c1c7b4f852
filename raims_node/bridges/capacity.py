"""How many client connections a node takes: its open-files limit less a reserve.

Past the limit a node could not accept at all: the kernel queued client connections
unanswered, the web port stopped answering with them, and nothing was logged or counted
(uvloop retries a failed accept quietly). Decisions, after redis-server (which raises
its limit for `maxclients` and answers `-ERR max number of clients reached`) and
nats-server (`-ERR 'maximum connections exceeded'`):
- at start `raise_open_files` lifts the soft RLIMIT_NOFILE to the hard limit (at most
  OPEN_FILES_TARGET), as redis-server and Go's runtime for nats-server do;
- a client connection that would leave fewer than RESERVE_FDS descriptors is refused
  at once with its protocol's error (an sbus or RV client is closed), counted in its
  transport's `error_closes` and logged at most once per LOG_EVERY_S, so the links,
  listeners, the key-value map and the logs keep the descriptors they need.
"""

from __future__ import annotations

import resource

OPEN_FILES_TARGET = 1 << 20
RESERVE_FDS = 128
LOG_EVERY_S = 60.0


def raise_open_files(target: int = OPEN_FILES_TARGET) -> int:
    """Lift the soft open-files limit toward `target` (never past the hard one); the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(soft, target if hard == resource.RLIM_INFINITY else min(hard, target))
    if want != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):
            return soft
    return want


def client_capacity() -> int:
    """The client connections this process may hold, under its open-files limit now."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return max(16, soft - RESERVE_FDS)
