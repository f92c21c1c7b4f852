"""Deliveries from the router node to their local owners (client sessions, the
console, the web), as the daemon carries out the node's actions."""

from __future__ import annotations

import logging

from raims_node.lograte import RateLimitedLog
from raims_node.router.actions import Deliver, DeliverRun
from raims_node.router.state import Counters

log = logging.getLogger("raims.daemon")


def hand_over(act: Deliver | DeliverRun, counters: Counters) -> None:
    """A delivery to its local owner (a client session, the console, the web). What the
    owner raises is counted (`internal_errors`) and logged, and costs this delivery only:
    raised on, it would end the read of the link that brought it, and every peer's
    traffic on that link with it."""
    try:
        if isinstance(act, Deliver):
            handler = getattr(act.owner, "on_deliver", None)
            if handler is not None:
                handler(act)
            return
        run = getattr(act.owner, "on_deliver_run", None)  # a batch frame's messages (wire/batch.py)
        if run is not None:
            run(act)
            return
        handler = getattr(act.owner, "on_deliver", None)
        if handler is not None:
            for one in act.delivers():
                handler(one)
    except Exception as exc:
        counters.internal_errors += 1
        _DELIVERY_ERRORS.log(type(act.owner).__name__, logging.ERROR,
                             f"delivery of {act.subject!r} to {type(act.owner).__name__} failed: {exc!r}")


_DELIVERY_ERRORS = RateLimitedLog(lambda level, text: log.log(level, "%s", text))
