"""One multicast data frame read alone: the latency path (issue 24).

With one message in flight, every node of a path is woken for a single frame, and its
cost is the number of layers it crosses with cold caches, not the work per byte
(measured: ~2-5 us per function layer, against ~0.1 us per message of the same code
when a run is pipelined). So a link read that decrypts to exactly one whole multicast
frame (transports/tcp.py checks the first word) comes here directly, not through the
frame reader, `Node.on_frames`, the action list and the loop's next turn:

- `forward_lone` does what `Forward.forward_fast` does for such a frame, in one
  function: the prefix unpacked once, the MAC checked with the cached key (a forged or
  corrupted frame is counted in `bad_mac` and dropped, as on every path), the
  forwarding set from the same (source, path, subject) cache, the same counters, and
  a local delivery through the same sequence-window check and `Deliver` actions.
- It returns the connections to pass the frame on to; the daemon writes it on each at
  once when nothing waits before it on that link (order per link is kept), and takes
  the node's actions (the deliveries) only when there are any.
- Anything else (ack or trace options, a source whose key is not known yet, our own
  frame, an inactive connection, a prefix that is not the usual one) returns None and
  takes the general path, unchanged.

`publish` is `Forward.publish` for a message a client sent alone (no reply, headers or
options; not anycast): the same seqno, fields, frame, MAC, local deliveries and
counters, the frame built from a per-subject template, returned with the connections
to write it on instead of as `Send` actions.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from raims_node.router import no_responders
from raims_node.router.actions import Action
from raims_node.router.forward import Forward, window_check
from raims_node.router.localsubs import LocalSub
from raims_node.router.state import OPT_ACK, OPT_ANY, OPT_TRACE, NodeState
from raims_node.wire.fields import Fid, FieldType, descriptor, encode_message_fields
from raims_node.wire.frame import (
    BRIDGE_DESC,
    DIGEST_DESC,
    DIGEST_LEN,
    MIN_BODY,
    SUBJECT_DESC,
    SUBJECT_OFFSET,
    VERSION,
    MsgType,
)

_PREFIX = struct.Struct(">IIH16sH16sHH")  # wire/frame.py's fixed prefix
_unpack_prefix = _PREFIX.unpack_from
_SLOW_OPTS = (OPT_ACK | OPT_TRACE) << 24  # in the first word: these take the full path
_NONE: tuple[int, ...] = ()
_SEQ_DATA = struct.Struct(">HQHI")  # a seqno field (u64), then the data field's descriptor and size
_unpack_seq_data = _SEQ_DATA.unpack_from
_pack_seq_data = _SEQ_DATA.pack
_WIDE, _TOO_WIDE = 1 << 32, 1 << 64  # seqnos written as u64 (wire/fields.py)
_SEQ_DATA_LEN = _SEQ_DATA.size
_SEQNO_DESC = descriptor(FieldType.U64, Fid.SEQNO)
_DATA_DESC = descriptor(FieldType.LONG_OPAQUE, Fid.DATA)
_pack_prefix = _PREFIX.pack
_ZERO_DIGEST = bytes(DIGEST_LEN)
LONE_PUBLISH_MAX = 1 << 20  # larger payloads take Forward.publish (the frame size may not fit 24 bits)
TEMPLATE_LIMIT = 4096  # subjects whose publish template is kept


class LonePath:
    def __init__(self, st: NodeState, forward: Forward) -> None:
        self.st = st
        self.forward = forward
        # subject -> (first word without size, hash, subject bytes, subject + pad, path)
        self._templates: dict[str, tuple[int, int, bytes, bytes, int]] = {}

    def publish(self, subject: str, payload: bytes, now_ns: int,
                no_echo: object | None) -> tuple[bytes, tuple[int, ...]] | None:
        """(frame, connections to write it on) of one message published alone, local
        deliveries queued for `take_actions`; None: use `Node.publish`."""
        if len(payload) > LONE_PUBLISH_MAX or self.st.floods_held:
            return None  # (floods held go first: the general path sends them, batch.py)
        tmpl = self._templates.get(subject)
        if tmpl is None:
            tmpl = self._template(subject)
            if tmpl is None:
                return None
        word, h, sub, padded, path = tmpl
        st = self.st
        seqno, start = st.pub_window.next_seqno(subject, now_ns)
        starts = self.forward.starts  # a new stream, or a young one's start told again after a change
        told = starts.told(subject, seqno, start, now_ns) if start or now_ns <= starts.until_ns else 0
        body: bytes | bytearray
        if start or told or not _WIDE <= seqno < _TOO_WIDE:
            body = encode_message_fields(seqno, now_ns if start else 0, None, None, payload, told)
        else:  # the usual message of a stream: its seqno and data, as encode_message_fields writes them
            size = len(payload)
            body = _pack_seq_data(_SEQNO_DESC, seqno, _DATA_DESC, size) + payload + (b"\0" if size & 1 else b"")
        frame = bytearray(_pack_prefix(word | (MIN_BODY + len(padded) + len(body)), h, BRIDGE_DESC, st.bridge,
                                       DIGEST_DESC, _ZERO_DIGEST, SUBJECT_DESC, len(sub)))
        frame += padded
        frame += body
        st.mac.sign(frame)
        counters = st.counters
        counters.published += 1
        forward = self.forward
        if st.subs:
            local = st.subs.match(subject)
            if local:
                forward._deliver(st.bridge, subject, seqno, local, payload, None, None, 0, no_echo)
        conns = forward.grace.own_set(st, forward._forward_set(st.bridge, path, sub, h, now_ns), sub, frame, now_ns)
        counters.forwarded += len(conns)
        counters.frames_out += len(conns)
        return bytes(frame), conns

    def _deliver(self, source: bytes, subject: str, data: bytes, off: int, end: int,
                 subs: Sequence[LocalSub], now_ns: int) -> None:
        """Forward._deliver_frame for the usual lone message (a seqno and the data, as a
        publisher writes every message of a stream after its first): the sequence check
        and its loss accounting as in `Forward._deliver_message`, then the same
        deliveries. Any other layout (a stamp, reply, headers, a batch) goes there."""
        if end - off >= _SEQ_DATA_LEN and not self.forward.reorder.busy(now_ns):  # else it may wait
            sdesc, seqno, ddesc, size = _unpack_seq_data(data, off)
            start = off + _SEQ_DATA_LEN
            if sdesc == _SEQNO_DESC and ddesc == _DATA_DESC and start + size + (size & 1) == end:
                loss = window_check(self.st, source, subject, seqno, 0, now_ns, 0, False, subs)
                if loss is None:
                    return
                self.forward._deliver(source, subject, seqno, subs, data[start:start + size], None, None, loss, None)
                return
        self.forward._deliver_frame(source, subject, data, off, end, subs, now_ns)

    def _template(self, subject: str) -> tuple[int, int, bytes, bytes, int] | None:
        sub, hashes, path, opt = self.forward._subject(subject)
        if opt & OPT_ANY:
            return None
        if len(self._templates) >= TEMPLATE_LIMIT:
            self._templates.clear()
        word = (VERSION << 31) | (MsgType.MCAST << 29) | (opt << 24)
        tmpl = self._templates[subject] = (word, hashes.full, sub, sub + b"\0" * (len(sub) & 1), path)
        return tmpl

    @property
    def has_actions(self) -> bool:
        """Deliveries (or anything else) queued by `forward_lone`, for `take_actions`."""
        return bool(self.st.out)

    def take_actions(self) -> list[Action]:
        st = self.st
        out, st.out = st.out, []
        return out

    def forward_lone(self, conn_id: int, data: bytes, now_ns: int) -> tuple[int, ...] | None:
        """The connections to pass `data` on to (deliveries here are queued for
        `take_actions`); None: not for this path, hand it to `Node.on_frames`. The
        caller checked the first word (version 1, multicast, a 24-bit size equal to
        len(data)) and the bridge descriptor."""
        st = self.st
        conn = st.conns.get(conn_id)
        word, h, _, source, ddesc, _, sdesc, slen = _unpack_prefix(data)
        off = SUBJECT_OFFSET + slen + (slen & 1)
        end = len(data)
        if conn is None or word & _SLOW_OPTS or ddesc != DIGEST_DESC or sdesc != SUBJECT_DESC or off > end \
                or not conn.active or st.floods_held:  # floods go first
            return None
        key = st.mac_key(source)
        if key is None or source == st.bridge:
            return None
        counters = st.counters
        counters.frames_in += 1
        if not key.verify(data):
            counters.bad_mac += 1
            return _NONE
        conn.last_recv_ns = now_ns  # any authenticated frame is a sign of life
        counters.mcast_recv += 1
        subject = data[SUBJECT_OFFSET:SUBJECT_OFFSET + slen]
        forward = self.forward
        conns = forward.relay_set(source, (word >> 27) & 3, subject, h, conn.conn_id, data, now_ns)
        sent = len(conns)
        counters.frames_out += sent
        counters.forwarded += sent
        if st.subs:
            text = subject.decode("utf-8", "surrogateescape")
            subs = st.subs.match(text)
            if subs:
                self._deliver(source, text, data, off, end, subs, now_ns)
                return conns
        if not sent:
            no_responders.unheard(forward, st.peers[source], source, subject, data, off, end, now_ns)
        return conns
