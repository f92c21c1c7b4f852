"""Per-peer show commands: peers, loss, counters, sync, skew, inbox (manual, "The Show
Commands").

One row per user, this node first (`<user>.*`) where the manual prints it, then the
live peers by uid. Cells the node has no value for are empty (None):
- peers: lat/max/avg (the node records one latency per peer and no ping history);
- sync: link_sum and sub_sum of a peer are those its last heartbeat carried, so only
  directly connected peers have them, as the manual says; mc_req, mc_res, req_adj and
  res_adj count the `_M.sync` messages, their `_I.<nonce>.sync` replies and the
  adjacency requests they caused: raims mends a heartbeat disagreement with `add_rte`
  instead (router/links.py), so they are 0 for every peer (and empty on this node's
  row, as the manual prints them);
- skew: hb and ref for peers that are not neighbours (hb is measured on the node's own
  links, so ref is always 0, this node), lat before the first pong;
- inbox: the last INBOX_TYPES_KEPT (32) inbox messages each way, by seqno and publish
  type (router/peer.py), as the manual's example; a peer with none logged yet shows its
  seqnos without types. The auth answering a peer's first hello leaves before the peer
  is known: its seqno is kept until the peer is (router/links.py), so the log starts at
  seqno 1 as the manual's.

Decision where the manual is vague: `show peers` accepts one of `zombie` (the peers
removed, instead of the live ones), `nonce`, `start` or `user` (the order of the rows).
"""

from __future__ import annotations

from collections.abc import Callable

from raims_node.bloom import BloomFilter
from raims_node.console.context import ConsoleContext
from raims_node.console.errors import BadArguments
from raims_node.console.names import Names, tport_label
from raims_node.console.result import Cell, CommandResult, Kind, Row
from raims_node.router.node import Node
from raims_node.router.peer import Peer
from raims_node.wire.subjects import bridge_b64

COUNTER_COLUMNS = ("user", "start", "hb_seqno", "hb_time", "snd_ibx", "rcv_ibx", "ping_snd", "ping_stime",
                   "pong_rcv", "ping_rcv")  # the manual's; the daemon's flow counters follow
PEER_ORDERS = {"nonce": "bridge", "start": "time", "user": "user"}  # argument -> column sorted
ZOMBIE = "zombie"


def _sort_key(value: Cell) -> tuple[int, str]:
    return (value, "") if isinstance(value, int) else (0, str(value))


def _nonzero(value: int) -> int | None:
    return value or None


def _bloom_count(peer: Peer) -> int | None:
    return peer.bloom.count if isinstance(peer.bloom, BloomFilter) else peer.zombie_subs


BRIDGE_VIEWS: dict[str, Callable[[bytes], str]] = {"host": bytes.hex, "ip": lambda b: ".".join(str(x) for x in b)}

def show_peers(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    node = ctx.node
    names = Names(node)
    if args and args[0] != ZOMBIE and args[0] not in PEER_ORDERS and args[0] not in BRIDGE_VIEWS:
        raise BadArguments(f"show peers takes {ZOMBIE}, an order ({', '.join(PEER_ORDERS)}) or a view of "
                           f"the bridge ({', '.join(BRIDGE_VIEWS)}), not {args[0]!r}")
    cols = ["user", "bridge", "sub", "seq", "link", "lat", "max", "avg", "time", "tport", "cost"]
    rows: list[Row]
    if args and args[0] == ZOMBIE:
        rows = [_peer_row(node, names, p, live=False) for p in node.zombies.values()]
    else:
        rows = [{
            "user": names.user(node.bridge), "bridge": bridge_b64(node.bridge), "sub": node.bloom.count,
            "seq": node.sub_seqno, "link": node.link_seqno, "lat": None, "max": None, "avg": None,
            "time": node.start_ns, "tport": None, "cost": None,
        }]
        rows += [_peer_row(node, names, p, live=True) for p in node.peers.values()]
        if args and args[0] in BRIDGE_VIEWS:  # the manual: the bridge's first 4 bytes, the host id
            view = BRIDGE_VIEWS[args[0]]
            for row, bridge in zip(rows, [node.bridge, *node.peers], strict=True):
                row["bridge"] = view(bridge[:4])
        elif args:
            col = PEER_ORDERS[args[0]]
            rows.sort(key=lambda r: _sort_key(r[col]))
    kinds = {"lat": Kind.DURATION, "max": Kind.DURATION, "avg": Kind.DURATION, "time": Kind.TIME}
    return CommandResult(cols, rows, kinds=kinds)


def _peer_row(node: Node, names: Names, peer: Peer, live: bool) -> Row:
    rec = node.db.peer(peer.bridge) if live else None
    hops = node.routes.next_hops(peer.bridge, 0) if live else ()
    return {
        "user": names.user(peer.bridge), "bridge": bridge_b64(peer.bridge), "sub": _bloom_count(peer),
        "seq": peer.sub_seqno, "link": rec.link_seqno if rec is not None else None,
        "lat": _nonzero(peer.latency_ns), "max": _nonzero(peer.lat_max_ns),
        "avg": peer.lat_sum_ns // peer.pong_recv if peer.pong_recv else None, "time": peer.start_ns,
        "tport": tport_label(hops[0].tport_name, hops[0].tport_id) if hops else None,
        "cost": node.routes.path_cost(peer.bridge, 0) if hops else None,
    }


def show_loss(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    names = Names(ctx.node)
    cols = ["user", "repeat", "rep_time", "not_sub", "not_time", "msg_loss", "loss_time", "ibx_loss", "ibx_time"]
    rows: list[Row] = []
    for b, peer in ctx.node.peers.items():
        loss = peer.loss
        rows.append({
            "user": names.user(b), "repeat": loss.repeat, "rep_time": _nonzero(loss.repeat_time),
            "not_sub": loss.not_sub, "not_time": _nonzero(loss.not_sub_time),
            "msg_loss": loss.msg_loss, "loss_time": _nonzero(loss.loss_time),
            "ibx_loss": loss.ibx_loss, "ibx_time": _nonzero(loss.ibx_time),
        })
    return CommandResult(cols, rows, kinds={c: Kind.TIME for c in cols if c.endswith("_time")}, spaced=tuple(cols))


def show_counters(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    """Per-peer heartbeat, inbox and ping counters; `show counters reject`: the frames
    and connections refused, by cause (handshake.REJECT_KINDS, not_authenticated,
    auth_timeout, pending_cap, bad_mac)."""
    node = ctx.node
    if args[:1] == ["reject"]:
        counts = {**node.counters.rejects, "bad_mac": node.counters.bad_mac}
        return CommandResult(["reason", "count"], [{"reason": k, "count": v} for k, v in sorted(counts.items())])
    names = Names(node)
    cols = list(COUNTER_COLUMNS)
    flow = ctx.flow()  # this node's flow control counters, on its own row
    cols += list(flow)
    rows: list[Row] = [dict.fromkeys(cols) | {"user": names.user(node.bridge), "start": node.start_ns} | flow]
    for b, p in node.peers.items():
        rows.append(dict.fromkeys(cols) | {
            "user": names.user(b), "start": p.start_ns, "hb_seqno": p.hb_seqno, "hb_time": _nonzero(p.hb_time_ns),
            "snd_ibx": p.inbox_sent, "rcv_ibx": p.inbox_recv, "ping_snd": p.ping_sent,
            "ping_stime": _nonzero(p.ping_time_ns), "pong_rcv": p.pong_recv, "ping_rcv": p.ping_recv,
        })
    return CommandResult(cols, rows, kinds={"start": Kind.TIME, "hb_time": Kind.TIME, "ping_stime": Kind.TIME},
                         spaced=COUNTER_COLUMNS)


SYNC_NONE = ("mc_req", "mc_res", "req_adj", "res_adj")  # counts of the `_M.sync` exchange raims does not have


def show_sync(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    node = ctx.node
    names = Names(node)
    cols = ["user", "start", "link_seqno", "link_sum", "sub_seqno", "sub_sum", "hb_diff", "mc_req", "mc_res",
            "req_adj", "res_adj", "ping_adj"]
    sums = node.db.seqno_sums()
    rows: list[Row] = [dict.fromkeys(cols) | {
        "user": names.user(node.bridge), "start": node.start_ns, "link_seqno": node.link_seqno,
        "link_sum": sums.link_sum, "sub_seqno": node.sub_seqno, "sub_sum": sums.sub_sum,
    }]
    for b, p in node.peers.items():
        rec = node.db.peer(b)
        rows.append(dict.fromkeys(cols) | {
            "user": names.user(b), "start": p.start_ns, "link_seqno": rec.link_seqno if rec else None,
            "link_sum": p.hb_link_sum if p.neighbor else None, "sub_seqno": p.sub_seqno,
            "sub_sum": p.hb_sub_sum if p.neighbor else None, "hb_diff": p.hb_diff, "ping_adj": p.ping_adj,
            **dict.fromkeys(SYNC_NONE, 0),
        })
    return CommandResult(cols, rows, kinds={"start": Kind.TIME})


def show_skew(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    names = Names(ctx.node)
    cols = ["user", "lat", "hb", "ref", "ping", "pong", "time"]
    rows: list[Row] = []
    for b, p in ctx.node.peers.items():
        rows.append({
            "user": names.user(b), "lat": _nonzero(p.latency_ns), "hb": p.skew_ns if p.hb_seqno else None,
            "ref": 0 if p.hb_seqno else None,  # the uid whose link measured hb: this node's own
            "ping": p.ping_skew_ns if p.ping_recv else None, "pong": p.pong_skew_ns if p.pong_recv else None,
            "time": p.skew_time_ns or None,
        })
    kinds = {c: Kind.DURATION for c in ("lat", "hb", "ping", "pong")} | {"time": Kind.TIME}
    return CommandResult(cols, rows, kinds=kinds)


def show_inbox(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    names = Names(ctx.node)
    cols = ["user", "send_seqno", "send_type", "recv_seqno", "recv_type"]
    rows: list[Row] = []
    peers = ctx.node.peers
    for b in [b for b in names.find(args[0]) if b in peers] if args else list(peers):
        p = peers[b]
        sent: list[tuple[int, str | None]] = sorted(p.inbox_sent_types)  # auth frames are logged late
        recv: list[tuple[int, str | None]] = sorted(p.inbox_recv_types)
        if not sent and not recv:
            sent, recv = [(p.inbox_sent, None)], [(p.inbox_recv, None)]
        for i in range(max(len(sent), len(recv))):  # the manual's columns: a sent and a received side by side
            s_seqno, s_type = sent[i] if i < len(sent) else (None, None)
            r_seqno, r_type = recv[i] if i < len(recv) else (None, None)
            rows.append({"user": names.user(b), "send_seqno": s_seqno, "send_type": s_type,
                         "recv_seqno": r_seqno, "recv_type": r_type})
    return CommandResult(cols, rows, group="user", blank_repeats=True, spaced=tuple(cols))
