"""Show commands over subscriptions and message streams: subs, seqno, pubtype (manual,
"The Show Commands").

Decisions where the manual is vague:
- subs [U] [W]: the manual asks every peer over `_I.<nonce>.subs`; here the node
  answers from what it holds: its local subscriptions, and for every other user the
  subjects and patterns replicated from its `_S` / `_P` updates and state replies
  (`Peer.subjects`, `Peer.patterns`). One row per subject or pattern, `type` being
  `sub` for a subject or the pattern syntax (`rv`, `glob`, `sbus`; the manual's
  "(p)"); `count` is the number of local subscriptions sharing it, empty for other
  users (a peer announces a subject once, however many of its clients want it).
  U is a user (`*`, the default, for all); W keeps the subjects containing it.
- seqno [W]: `source` is `ipc` for what this node published, else the publisher;
  `seqno` is the message count within the stream's time frame (the low 35 bits);
  `start` the time frame's start. `time` (last seen) is empty: the windows do not
  keep it.
- pubtype: every type counted in either direction, in the order of the manual's
  publish types.
"""

from __future__ import annotations

from collections import Counter

from raims_node.console.context import ConsoleContext
from raims_node.console.names import ALL_USERS, Names
from raims_node.console.result import CommandResult, Kind, Row
from raims_node.router.seqwin import SEQ_MASK, frame_start_ns
from raims_node.wire.subjects import PublishType

SUBJECT_TYPE = "sub"
IPC_SOURCE = "ipc"


def show_subs(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    node = ctx.node
    names = Names(node)
    users = names.find(args[0] if args else ALL_USERS)
    word = args[1] if len(args) > 1 else None
    rows: list[Row] = []
    for b in users:
        user = names.user(b)
        found: list[tuple[str, str, int | None]]
        if b == node.bridge:
            counts = Counter((str(r["type"]), str(r["subject"])) for r in node.subs.rows())
            found = [(kind, subject, n) for (kind, subject), n in counts.items()]
        else:
            peer = node.peers[b]
            found = [(SUBJECT_TYPE, subject, None) for subject in sorted(peer.subjects)]
            found += [(syntax, text, None) for syntax, text in sorted(peer.patterns)]
        rows += [{"user": user, "subject": subject, "type": kind, "count": n}
                 for kind, subject, n in found if word is None or word in subject]
    return CommandResult(["user", "subject", "type", "count"], rows, group="user", blank_repeats=True)


def show_seqno(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    node = ctx.node
    names = Names(node)
    word = args[0] if args else None
    rows: list[Row] = []
    for subject, seqno in node.pub_window.entries():
        rows.append(_seqno_row(IPC_SOURCE, seqno, subject))
    for (source, subject), seqno in node.sub_window.entries():
        rows.append(_seqno_row(names.user(source), seqno, subject))
    rows = [r for r in rows if word is None or word in str(r["subject"])]
    return CommandResult(["source", "seqno", "start", "time", "subject"], rows,
                         kinds={"start": Kind.TIME, "time": Kind.TIME})


def _seqno_row(source: str, seqno: int, subject: str) -> Row:
    return {"source": source, "seqno": seqno & SEQ_MASK, "start": frame_start_ns(seqno), "time": None,
            "subject": subject}


# The windows expose no iteration; read their two generations, the current one first
# (a key moves to the current generation when used, so none is in both).
def show_pubtype(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    counters = ctx.node.counters
    # multicast data is counted apart from the dict (the forwarding hot path)
    recv = {**counters.pub_recv, **({"mcast_subject": counters.mcast_recv} if counters.mcast_recv else {})}
    send = {**counters.pub_send, **({"mcast_subject": counters.published} if counters.published else {})}
    order = {t.name.lower(): t.value for t in PublishType}
    types = sorted(recv.keys() | send.keys(), key=lambda t: (order.get(t, len(order)), t))
    rows: list[Row] = [{"type": t, "recv_count": recv.get(t, 0), "send_count": send.get(t, 0)} for t in types]
    return CommandResult(["type", "recv_count", "send_count"], rows)
