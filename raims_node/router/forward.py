"""Multicast data: publishing, forwarding, anycast and shardcast, and local delivery.

Manual "Link State" (reverse-path forwarding on up to 4 equal-cost paths, chosen by
subject hash), "Anycast and Shardcast", "Message Loss". A published frame goes out on
the links of the publisher's forwarding tree for its path whose far side's filters
match; a router passes it on along the source's tree the same way; every node delivers
to its local subscriptions after the subscription sequence window's check.

The hot path (`forward_fast`) reads the header without decoding, checks the MAC with a
cached key and looks the forwarding set up by (source, path, subject), cached until the
link state or any filter changes; a frame also subscribed here is delivered in the same
pass. A publisher keeps each subject's bytes, hashes and path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from raims_node.bloom import SubjectHashes
from raims_node.linkstate.routes import path_for_hash
from raims_node.router import no_responders
from raims_node.router.actions import Deliver, DeliverRun, Send
from raims_node.router.cache_stats import CacheStats
from raims_node.router.localsubs import LocalSub
from raims_node.router.messages import get_int
from raims_node.router.no_responders import is_inbox_reply
from raims_node.router.point import PointToPoint
from raims_node.router.point import body as _body
from raims_node.router.queue_choice import QueueTurns
from raims_node.router.reorder import ReorderHold
from raims_node.router.route_grace import M_PREFIX, RouteGrace
from raims_node.router.seqwin import Verdict, frame_start_ns
from raims_node.router.state import OPT_ACK, OPT_ANY, OPT_TRACE, Conn, NodeState
from raims_node.router.stream_start import SUB_KNOWN_NS, StreamStarts, owed
from raims_node.wire import (
    Fid,
    Header,
    Message,
    MsgType,
    decode_frame,
    decode_message_fields,
    encode_frame,
    encode_message_fields,
    frame_with_body,
    message_of,
    path_opt,
    peek,
)
from raims_node.wire import subjects as S
from raims_node.wire.batch import Run, decode_batch_run, encode_batch_fields, skip_run, split_runs

MPing = Callable[[bytes, int, int, str, int], None]  # (source, stamp, token, tport, now_ns)

FORWARD_CACHE_LIMIT = 65536
PUBLISH_CACHE_LIMIT = 65536  # subjects whose bytes, hashes and path are kept for publishing
M_PING = S.M_PING.encode()


def cache_sizes(forward: Forward) -> dict[str, tuple[int, CacheStats | None]]:
    """Entries `forward` holds, with their hit counts (show cache): forwarding decisions
    by (source, path, subject), and the subjects published here with their hashes."""
    return {"forward_decisions": (len(forward._fwd_cache), forward.fwd_stats),
            "published_subjects": (len(forward._published), None)}


class Forward:
    def __init__(self, st: NodeState, on_mping: MPing | None = None) -> None:
        self.st = st
        self.on_mping = on_mping
        self._fwd_cache: dict[tuple[bytes, int, bytes], tuple[int, ...]] = {}
        self.fwd_stats = CacheStats()
        self._fwd_version: tuple[int, int, int] = (-1, -1, -1)
        self._fwd_links = -1  # the db's links version the cache was made from
        self._fwd_built: tuple[bool, int] = (False, 0)  # converged, and when, as the cache was emptied
        self.grace = RouteGrace()  # make before break for relayed frames (router/route_grace.py)
        self.reorder = ReorderHold(st.sub_window, self._redeliver)  # frames ahead of a gap wait
        self.starts = StreamStarts()  # young streams' starts, told again after a change
        self.points = PointToPoint(st, self._deliver_local, self._deliver)  # `_INBOX.` replies, `any S M`
        self.shares = self.points.shares  # `any S M` shares ahead of an inbox gap wait (share_hold.py)
        self._links_seen = st.db.links_version
        self._published: dict[str, tuple[bytes, SubjectHashes, int, int]] = {}
        self._queues = QueueTurns()

    # ------------------------------------------------------------------ publish

    def _subject(self, subject: str) -> tuple[bytes, SubjectHashes, int, int]:
        """(bytes, hashes, path, option bits) of a subject published here, cached."""
        cached = self._published.get(subject)
        if cached is None:
            if len(self._published) >= PUBLISH_CACHE_LIMIT:
                self._published.clear()
            sub = subject.encode("utf-8", "surrogateescape")
            hashes = SubjectHashes(sub)
            anycast = is_inbox_reply(subject)
            path = path_for_hash(hashes.full)
            cached = self._published[subject] = (sub, hashes, path, path_opt(path) | (OPT_ANY if anycast else 0))
        return cached

    def publish_run(self, subject: str, payloads: Run, now_ns: int, no_echo: object | None) -> None:
        """Publish a pipelined run of one subject (no reply, headers or options): one
        batch frame per BATCH_BYTES of records (wire/batch.py), delivered here in order."""
        st = self.st
        sub, hashes, path, subject_opt = self._subject(subject)
        if subject_opt & OPT_ANY or len(payloads) < 2:
            for payload in payloads:
                self.publish(subject, payload, now_ns, None, None, no_echo, 0)
            return
        local = st.subs.match(subject) if st.subs else ()
        for run in split_runs(payloads):
            n = len(run)
            first = st.pub_window.next_seqnos(subject, n, now_ns) if n > 1 else None
            if first is None:  # a lone large payload, or the counter wraps (a new stream)
                for payload in run:
                    self.publish(subject, payload, now_ns, None, None, no_echo, 0)
                continue
            seqno, start = first  # a young stream's start told again after a change, as for one message
            told = self.starts.told(subject, seqno, start, now_ns) if start or now_ns <= self.starts.until_ns else 0
            frame = frame_with_body(MsgType.MCAST, sub, st.bridge, encode_batch_fields(
                seqno, now_ns if start else 0, run, told), subject_opt, hashes.full)
            st.mac.sign(frame)
            st.counters.published += n
            if local:
                self._deliver_run(st.bridge, subject, seqno, local, run, 0, no_echo)
            self._forward_mcast(bytes(frame), hashes, path, now_ns)

    def publish(self, subject: str, payload: bytes, now_ns: int, reply: str | None, headers: bytes | None,
                no_echo: object | None, opt: int, to: bytes | None = None) -> None:
        """`to`: an `_INBOX.` subject's node, the only one to send it to (no_responders.py)."""
        st = self.st
        seqno, start = st.pub_window.next_seqno(subject, now_ns, share=bool(opt & OPT_ANY) or to is not None)
        sub, hashes, path, subject_opt = self._subject(subject)
        anycast = bool((subject_opt | opt) & OPT_ANY)  # an `_INBOX.` reply, or `any S M`
        told = 0 if anycast else self.starts.told(subject, seqno, start, now_ns)
        body = encode_message_fields(seqno, now_ns if start else 0, reply, headers, payload, told)
        frame = frame_with_body(MsgType.MCAST, sub, st.bridge, body, subject_opt | opt, hashes.full)
        st.mac.sign(frame)
        st.counters.published += 1
        local = st.subs.match(subject) if st.subs and to is None else ()
        if local:
            self._deliver(st.bridge, subject, seqno, local, payload, reply, headers, 0, no_echo)
        if not anycast:
            self._forward_mcast(bytes(frame), hashes, path, now_ns)
        else:  # point to point (router/point.py)
            self.points.send(bytes(frame), hashes, bool(opt & OPT_ANY), bool(local), now_ns, to)

    def mping(self, path: int, token: int, now_ns: int) -> None:
        """`_M.ping` on `path` to every node (each answers with a pong, remote.py)."""
        st = self.st
        frame = encode_frame(MsgType.MCAST, M_PING, st.bridge, [(Fid.STAMP, now_ns), (Fid.TOKEN, token)],
                             path_opt(path) | OPT_ACK)
        st.mac.sign(frame)
        self._forward_mcast(bytes(frame), SubjectHashes(M_PING), path, now_ns)

    # ------------------------------------------------------------------ receive

    def forward_fast(self, conn: Conn, data: bytes, head: Header, now_ns: int) -> bool:
        """The router's hot path: a multicast frame from a known source. Header read
        without decoding, MAC checked with the cached key, the forwarding set looked up by
        (source, path, subject hash), and, when subscribed here, the fields decoded once
        for the local delivery. False: take the full path."""
        if head.msg_type != MsgType.MCAST or not conn.active or head.opt & (OPT_ACK | OPT_TRACE):
            return False
        st = self.st
        source = head.bridge
        key = st.mac_key(source)
        if key is None or source == st.bridge:
            return False
        if not key.verify(data):
            st.counters.bad_mac += 1
            return True
        conn.last_recv_ns = now_ns  # any authenticated frame is a sign of life
        counters = st.counters
        counters.mcast_recv += 1
        conns = self.relay_set(source, (head.opt >> 3) & 3, head.subject, head.subject_hash, conn.conn_id,
                               data, now_ns)
        sent = len(conns)
        out = st.out
        for conn_id in conns:
            out.append(Send(conn_id, data))
        counters.frames_out += sent
        counters.forwarded += sent
        if st.subs:
            subject = head.subject.decode("utf-8", "surrogateescape")
            subs = st.subs.match(subject)
            if subs:
                self._deliver_frame(source, subject, data, *_body(head), subs, now_ns)
                return True
        if not sent:
            no_responders.unheard(self, st.peers[source], source, head.subject, data, *_body(head), now_ns)
        return True

    def on_mcast(self, conn: Conn, data: bytes, head: Header, now_ns: int) -> None:
        """A multicast frame on the full path: with ack or trace options, or from a
        source whose key was learned in this pass."""
        sub, source, opt = head.subject, head.bridge, head.opt
        subject = sub.decode("utf-8", "surrogateescape")
        path = (opt >> 3) & 3
        forwarded = self._emit(self.relay_set(source, path, sub, head.subject_hash, conn.conn_id, data, now_ns), data)
        if sub == M_PING and self.on_mping is not None:
            d = decode_frame(data).as_dict()
            self.on_mping(source, get_int(d, Fid.STAMP), get_int(d, Fid.TOKEN), conn.tport.name, now_ns)
            return
        delivered = self._deliver_local(source, subject, data, now_ns, own=False, transit=forwarded > 0)
        if opt & (OPT_ACK | OPT_TRACE):
            self._ack_reply(source, subject, data, conn, "trace" if opt & OPT_TRACE else "ack",
                            bool(opt & OPT_TRACE) or delivered, now_ns)

    def _ack_reply(self, source: bytes, subject: str, data: bytes, conn: Conn, kind: str, send: bool,
                   now_ns: int) -> None:
        """`_I.<source>.trace` from every router a traced message passes, `.ack` from the
        nodes that deliver an acked one, naming the transport it arrived on."""
        if not send:
            return
        seqno = decode_frame(data).get(Fid.SEQNO)
        self.st.send_inbox(source, kind, [(Fid.REF_SEQNO, seqno if isinstance(seqno, int) else 0),
                                          (Fid.SUBJECT, subject), (Fid.TPORT, conn.tport.name)], now_ns)

    def _forward_mcast(self, data: bytes, hashes: SubjectHashes, path: int, now_ns: int) -> None:
        """Our own frame out on our tree for `path`, behind the floods held (batch.py)."""
        st = self.st
        st.floods_first(now_ns)
        conns = self._forward_set(st.bridge, path, hashes.subject, hashes.full, now_ns)
        self._emit(self.grace.own_set(st, conns, hashes.subject, data, now_ns), data)

    def _emit(self, conns: tuple[int, ...], data: bytes) -> int:
        """`data` out on each of `conns`, counted as forwarded; how many."""
        st = self.st
        for conn_id in conns:
            st.emit(conn_id, data)
        st.counters.forwarded += len(conns)
        return len(conns)

    def relay_set(self, source: bytes, path: int, subject: bytes, h: int, came: int, data: bytes,
                  now_ns: int) -> tuple[int, ...]:
        """Connections a frame from `source` that arrived on `came` goes on to, after the
        floods held: the source's tree, or, while links change, the old routes' or ours."""
        st = self.st
        st.floods_first(now_ns)
        conns = self._forward_set(source, path, subject, h, now_ns)
        if came in conns:
            conns = tuple(c for c in conns if c != came)
        if st.converged and not self.grace.in_flux(now_ns) or source == st.bridge or subject.startswith(M_PREFIX):
            return conns  # the usual case; our own frames and the pings keep to the tree
        key = (source, path, subject)
        return self.grace.with_half_links(st, conns, came, subject, data, now_ns, key) if conns else self.grace.extra(
            st, key, came, data, now_ns, lambda: self._forward_set(st.bridge, path, subject, h, now_ns))

    def _forward_set(self, source: bytes, path: int, subject: bytes, h: int, now_ns: int) -> tuple[int, ...]:
        """Connections a multicast from `source` on `path` goes out on, pruned by the
        filters behind each link; cached until the link state or any filter changes."""
        st = self.st
        version = (st.db.version, st.filters_version, len(st.conns))
        if version != self._fwd_version:
            links = st.db.links_version  # changed: make before break with a converged node's routes
            if links != self._fwd_links and (self._fwd_built[0] or self._fwd_built[1] != st.converge_ns):
                self.watch_links(now_ns)  # the grace runs from now if Node._flush has not told yet
                self.grace.keep(self._fwd_cache, now_ns)
            self._fwd_cache = {}
            self._fwd_version = version
            self._fwd_links = links
            self._fwd_built = (st.converged, st.converge_ns)
        key = (source, path, subject)
        conns = self._fwd_cache.get(key)
        self.fwd_stats.lookups += 1
        if conns is None:
            hashes = SubjectHashes(subject, h)

            def matches(b: bytes) -> bool:
                peer = st.peers.get(b)  # no filter yet (a joining node, a new link): send, the far side filters
                return subject.startswith(M_PREFIX) or peer is None or peer.filter_passes(hashes) is not False

            out = []
            for link in st.routes.forward_links(source, path, matches):
                conn = st.conn_for(link.tport_id, link.peer_bridge)
                if conn is not None:
                    out.append(conn.conn_id)
            conns = tuple(out)
            if len(self._fwd_cache) >= FORWARD_CACHE_LIMIT:
                self._fwd_cache.clear()
            self._fwd_cache[key] = conns
            self.fwd_stats.missed(len(self._fwd_cache), len(conns))
        return conns

    # ------------------------------------------------------------------ local delivery

    def _deliver_local(self, source: bytes, subject: str, data: bytes | bytearray, now_ns: int, own: bool,
                       transit: bool = False, no_echo: object | None = None) -> bool:
        """Deliver a received frame to the local subscriptions; True when any got it."""
        st = self.st
        subs = st.subs.match(subject)
        if not subs:
            peer = st.peers.get(source)
            if peer is not None and not own and not transit:
                no_responders.unheard(self, peer, source, subject.encode("utf-8", "surrogateescape"), data,
                                      *_body(peek(data)), now_ns)
            return False
        if not own and no_echo is None:
            return self._deliver_frame(source, subject, bytes(data), *_body(peek(data)), subs, now_ns)
        return self._deliver_message(source, subject, message_of(decode_frame(data).fields), subs, now_ns, own,
                                     no_echo)

    def _deliver_frame(self, source: bytes, subject: str, data: bytes, off: int, end: int,
                       subs: Sequence[LocalSub], now_ns: int, due_ns: int = 0) -> bool:
        """Deliver a received message frame (fields data[off:end]: a message or a batch, wire/batch.py),
        unless it waits for a gap (reorder.py; `due_ns`: a held one's); False: all repeats."""
        batch = decode_batch_run(data, off, end)
        if batch is None:
            msg = decode_message_fields(data, off, end)
            first, stamp, start = msg.seqno, msg.stamp, msg.start
        else:
            first, stamp, start = batch[0], batch[1], batch[3]
        reorder = self.reorder
        if reorder.busy(now_ns) and reorder.wait(source, subject, first, stamp, data, off, end, now_ns, due_ns,
                                                 start, min(sub.since_ns for sub in subs)):
            return True
        delivered = self._deliver_message(source, subject, msg, subs, now_ns, own=False) if batch is None \
            else self._deliver_batch(source, subject, batch, subs, now_ns)
        if reorder.held:
            reorder.release((source, subject), now_ns)
        return delivered

    def _redeliver(self, source: bytes, subject: str, data: bytes, off: int, end: int, due_ns: int, now_ns: int) -> None:
        """A held frame through delivery again, to whom subscribes now (router/reorder.py)."""
        subs = self.st.subs.match(subject) if self.st.subs else ()
        if subs:
            self._deliver_frame(source, subject, data, off, end, subs, now_ns, due_ns)

    def watch_links(self, now_ns: int) -> None:
        """After each input (Node._flush): when the links changed, relays may use the old
        routes and subscribers hold frames ahead of a gap for a while from now."""
        if self.st.db.links_version != self._links_seen:
            self._links_seen = self.st.db.links_version
            self.grace.started(now_ns)
            self.reorder.routes_changed(now_ns)
            self.shares.routes_changed(now_ns)
            self.starts.routes_changed(now_ns)

    def release_due(self, now_ns: int) -> None:
        """Held frames and shares that are due go on (Node.tick)."""
        self.reorder.release_due(now_ns)
        self.shares.release_due(now_ns)

    def next_due_ns(self) -> int | None:
        """When the earliest held frame or share is due (Node.next_wake_ns)."""
        return self.shares.next_due_ns(self.reorder.next_due_ns())

    def _deliver_batch(self, source: bytes, subject: str, batch: tuple[int, int, Run, int],
                       subs: Sequence[LocalSub], now_ns: int) -> bool:
        seqno, stamp, payloads, start = batch
        checked = run_check(self.st, source, subject, seqno, len(payloads), stamp, now_ns, start, subs)
        if checked is None:
            return False
        loss, skip = checked
        self._deliver_run(source, subject, seqno + skip, subs, skip_run(payloads, skip), loss, None)
        return True

    def _deliver_run(self, source: bytes, subject: str, seqno: int, subs: Sequence[LocalSub], payloads: Run,
                     loss: int, no_echo: object | None) -> None:
        """Deliver a run of consecutive messages (seqno, seqno + 1, ...) in order; `loss`
        goes with the first. Plain subscriptions without loss get one DeliverRun each."""
        if not loss and all(sub.queue is None for sub in subs):
            out = self.st.out
            n = 0
            for sub in subs:
                if sub.owner is not no_echo or no_echo is None:
                    out.append(DeliverRun(sub.owner, sub.sid, subject, payloads, source))
                    n += len(payloads)
            self.st.counters.delivered += n
            return
        for i, payload in enumerate(payloads):
            self._deliver(source, subject, seqno + i, subs, payload, None, None, loss if not i else 0, no_echo)

    def _deliver_message(self, source: bytes, subject: str, msg: Message, subs: Sequence[LocalSub], now_ns: int,
                         own: bool, no_echo: object | None = None) -> bool:
        """Deliver `msg` to `subs` after the sequence check; False when it repeats one
        already delivered."""
        loss = 0
        if not own:
            checked = window_check(self.st, source, subject, msg.seqno, msg.stamp, now_ns, msg.start,
                                   msg.start > 0 and owed(msg.start, subs), subs)
            if checked is None:
                return False
            loss = checked
        self._deliver(source, subject, msg.seqno, subs, msg.payload, msg.reply, msg.headers, loss, no_echo)
        return True

    def _deliver(self, source: bytes, subject: str, seqno: int, subs: Sequence[LocalSub], payload: bytes,
                 reply: str | None, headers: bytes | None, loss: int, no_echo: object | None) -> None:
        """One Deliver per plain subscription, one per queue group this node is chosen for."""
        out = self.st.out
        groups: dict[str, list[LocalSub]] | None = None
        n = 0
        for sub in subs:
            if sub.owner is no_echo and no_echo is not None:
                continue
            if sub.queue is None:
                n += 1
                out.append(Deliver(sub.owner, sub.sid, subject, reply, payload, source, loss, headers))
            else:
                if groups is None:
                    groups = {}
                groups.setdefault(sub.queue_marker or "", []).append(sub)
        if groups is not None:
            for marker, members in groups.items():
                member = self._queues.pick(self.st, marker, members, source, seqno)
                if member is not None:
                    n += 1
                    out.append(Deliver(member.owner, member.sid, subject, reply, payload, source, loss, headers))
        self.st.counters.delivered += n


def window_check(st: NodeState, source: bytes, subject: str, seqno: int, stamp: int, now_ns: int, start: int = 0,
                 start_owed: bool = False, subs: Sequence[LocalSub] = ()) -> int | None:
    """The subscription window's verdict on one message: None when it repeats one
    already delivered (counted as a repeat), else the messages lost before it
    (counted as loss against the source; `start`, `start_owed`: SubWindow.check; `subs`:
    the subscriptions it goes to, for a stream's first message here, `first_lost`)."""
    verdict, loss = st.sub_window.check(source, subject, seqno, stamp, now_ns, start, start_owed)
    if verdict is Verdict.OK:
        return 0
    if verdict is Verdict.FIRST:
        loss = first_lost(st, source, subject, seqno, stamp, subs)
    if verdict is Verdict.REPEAT:
        count_against(st, source, 1, 0, now_ns)
        return None
    if loss:
        count_against(st, source, 0, loss, now_ns)
    return loss


def run_check(st: NodeState, source: bytes, subject: str, seqno: int, n: int, stamp: int, now_ns: int,
              start: int, subs: Sequence[LocalSub]) -> tuple[int, int] | None:
    """`window_check` for a run of `n` messages (a batch frame, SubWindow.check_run;
    `start`: the stream's start it tells, 0: none): None when all of it repeats, else
    (messages lost before it, how many of its first ones repeat: only the rest is
    delivered)."""
    verdict, loss, skip = st.sub_window.check_run(source, subject, seqno, n, stamp, now_ns, start,
                                                  start > 0 and owed(start, subs))
    if verdict is Verdict.FIRST:
        loss = first_lost(st, source, subject, seqno, stamp, subs)
    if skip or loss:
        count_against(st, source, skip, loss, now_ns)
        if skip >= n:
            return None
    return loss, skip


def count_against(st: NodeState, source: bytes, repeats: int, loss: int, now_ns: int) -> None:
    """Repeated and lost messages counted against their source (show loss)."""
    peer = st.peers.get(source)
    if peer is None:
        return
    if repeats:
        peer.loss.repeat += repeats
        peer.loss.repeat_time = now_ns
    if loss:
        peer.loss.msg_loss += loss
        peer.loss.loss_time = now_ns


def first_lost(st: NodeState, source: bytes, subject: str, seqno: int, stamp: int, subs: Sequence[LocalSub]) -> int:
    """The messages lost before a stream's first message here (`check` said FIRST): when
    it has no stamp and its time frame began after the oldest of `subs` was known to the
    publishers (stream_start.owed), and after the links last changed (SubWindow.unseen_start).
    Not for an `_INBOX.` reply: it is sent only to the nodes whose filter matches when it
    is published (router/point.py), so a node that matched later never had the first."""
    if stamp or not subs or is_inbox_reply(subject):
        return 0
    frame_ns = frame_start_ns(seqno)
    if not owed(frame_ns, subs):
        return 0
    return st.sub_window.unseen_start(source, subject, seqno, frame_ns - SUB_KNOWN_NS)
