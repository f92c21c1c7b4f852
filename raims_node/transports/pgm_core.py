"""PGM-style reliable multicast over UDP: the sans-IO core (manual "Open PGM").

Datagrams and a clock go in (`receive`, `tick`); datagrams to send (`out`: (address or
None for the group, bytes)) and events (`events`) come out. transports/pgm.py puts it
on sockets; pgm_wire.py has the bytes.

What of RFC 3208 (PGM) is followed:
- Sources number their data packets (ODATA) in a transmit window of `txw_sqns` packets
  and `txw_secs` seconds; the window's trailing and leading edges are advertised in
  source path messages (SPM): ambient ones every SPM_AMBIENT_S, and heartbeat SPMs
  after data, IHB_MIN_S doubling to the ambient interval (RFC 3208 3.5), so that a loss
  at the end of a burst is noticed soon.
- Receivers detect gaps from data and SPM leads, wait a random back-off up to
  NAK_BO_IVL_S, and then unicast a NAK listing the missing sequence numbers (OPT_NAK_LIST)
  to the source's inbox; they repeat it after NAK_RPT_IVL_S without a confirmation, or
  NAK_RDATA_IVL_S after one, at most NAK_RETRIES times (RFC 3208 5.3).
- The source answers a NAK of the group session with an NCF on the group (which
  suppresses the same NAK at the other receivers, RFC 3208 5.3) and with RDATA from the
  transmit window, multicast; one sequence number is repaired at most once per
  RDATA_HOLD_S (repeated NAKs of one loss cost one repair).
- A sequence number that leaves the source's window before it is repaired (the SPM or
  data trail passes it), that outlives `rxw_secs`, that falls out of a receive window
  of `rxw_sqns`, or whose NAKs run out, is unrecoverable: counted in `lost` and reported
  as a Loss event; the stream goes on from the next record start.
Left out: network elements (DLR, NAK forwarding, the NLA path in SPMs), FEC, rate
control and congestion control, OPT_SYN/FIN/RST, sequence wrap-around (2^32 packets).

Decisions where the manual is vague:
- Peers are discovered on the group: any packet from an unknown session (TSI) makes a
  PeerUp event (up to MAX_PEERS); a peer silent for PEER_EXPIRY_S makes PeerDown.
- Frames for one peer that are not multicast data (the router's point-to-point frames:
  handshakes, link state, inbox messages) travel in a reliable unicast stream to the
  peer's inbox (the manual's "UDP inbox protocol"), with the same SPM/NAK/RDATA rules.
  Multicast data goes once on the group, its record naming the peers it is for; a peer
  not named drops it.
- A receiver starts its window of a source's group session after the group lead the
  source had when it opened the receiver's unicast stream (`glead` of its first packet):
  nothing for this receiver was multicast before that. When that packet is lost for good
  (or the peer is found again mid-stream), after the least `glead` its stream carried.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from raims_node.transports.pgm_wire import (
    DATA_OVERHEAD,
    MAX_SQNS,
    NAK,
    NCF,
    NO_RECORD,
    RDATA,
    SPM,
    Packet,
    PgmWireError,
    RecordReader,
    as_rdata,
    decode,
    encode_data,
    encode_nak,
    encode_ncf,
    encode_record,
    encode_spm,
)

SPM_AMBIENT_S = 0.5
IHB_MIN_S = 0.02
NAK_BO_IVL_S = 0.02
NAK_RPT_IVL_S = 0.15
NAK_RDATA_IVL_S = 0.3
NAK_RETRIES = 20
RDATA_HOLD_S = 0.02
PEER_EXPIRY_S = 10.0
MAX_PEERS = 1024  # sessions one transport keeps (a flood of made-up session ids stops here)
MAX_RECORD = 64 << 20
FIRST_SQN = 1
INF = float("inf")
UDP_IP_OVERHEAD = 28
Addr = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PgmParams:
    mtu: int = 16384
    txw_sqns: int = 4096
    txw_secs: float = 15.0
    rxw_sqns: int = 4096
    rxw_secs: float = 15.0


@dataclass(frozen=True, slots=True)
class PeerUp:
    tsi: bytes
    inbox: Addr


@dataclass(frozen=True, slots=True)
class PeerDown:
    tsi: bytes
    reason: str


@dataclass(frozen=True, slots=True)
class Frames:
    tsi: bytes
    frames: list[bytes]


@dataclass(frozen=True, slots=True)
class Loss:
    tsi: bytes
    unicast: bool
    count: int


Event = PeerUp | PeerDown | Frames | Loss


@dataclass
class Counters:
    odata: int = 0
    rdata: int = 0  # repairs received
    rdata_sent: int = 0
    spm: int = 0
    naks_sent: int = 0
    naks_recv: int = 0
    ncf: int = 0
    nak_out_of_window: int = 0  # asked for what the window no longer holds
    lost: int = 0  # unrecoverable sequence numbers (receiver side)
    dup: int = 0
    bad: int = 0  # datagrams refused by the parser
    peers_refused: int = 0  # packets of new sessions beyond MAX_PEERS
    not_for_us: int = 0  # group records naming other peers only
    bytes_out: int = 0
    bytes_in: int = 0


class TxStream:
    """One source stream: the group session (sid 0) or a unicast stream to one peer."""

    def __init__(self, sid: int, dest: Addr | None, now: float) -> None:
        self.sid = sid
        self.dest = dest  # None: the group
        self.window: deque[tuple[int, float, bytes]] = deque()  # (sqn, sent at, packet)
        self.next_sqn = FIRST_SQN  # lead FIRST_SQN - 1 (0): nothing sent yet
        self.pending = bytearray()
        self.first = NO_RECORD  # offset of the first record start in pending
        self.spm_sqn = 0
        self.spm_due = now + SPM_AMBIENT_S
        self.ihb = 0.0  # current heartbeat-SPM interval after data (0: ambient)
        self.repaired: dict[int, float] = {}  # sqn -> last RDATA time

    @property
    def lead(self) -> int:
        return self.next_sqn - 1

    @property
    def trail(self) -> int:
        return self.window[0][0] if self.window else self.next_sqn

    def add(self, record: bytes) -> None:
        if self.first == NO_RECORD:
            self.first = len(self.pending)
        self.pending += record

    def expire(self, now: float, p: PgmParams) -> None:
        win = self.window
        while win and (len(win) > p.txw_sqns or now - win[0][1] > p.txw_secs):
            sqn, _, _ = win.popleft()
            self.repaired.pop(sqn, None)

    def packet(self, sqn: int) -> bytes | None:
        if not self.window or not self.trail <= sqn <= self.lead:
            return None
        return self.window[sqn - self.trail][2]


class RxStream:
    """What one receiver knows of one source stream."""

    def __init__(self, sid: int, start: int) -> None:
        self.sid = sid
        self.next = start  # next sqn to deliver
        self.lead = start - 1  # highest sqn known to exist
        self.held: dict[int, tuple[bytes, int]] = {}  # out of order: sqn -> (payload, first)
        self.missing: dict[int, list[float]] = {}  # sqn -> [due, state, tries, since]
        self.gone: set[int] = set()  # declared lost, not yet passed by `next`
        self.due = INF  # no missing entry is due before (a lower bound: `_naks` walks them only then)
        self.floor = start  # sqns below it that are not held are lost (the source's trail passed them)
        self.reader = RecordReader(MAX_RECORD)


_BACKOFF, _WAIT_NCF, _WAIT_DATA = 0.0, 1.0, 2.0


@dataclass
class Peer:
    tsi: bytes
    inbox: Addr
    heard: float
    group: RxStream | None = None
    uni: RxStream | None = None  # its stream to us
    tx: TxStream | None = None  # our stream to it
    glead_min: float = INF  # the least group lead its unicast packets carried (first one lost)


class PgmCore:
    def __init__(self, tsi: bytes, inbox: Addr, params: PgmParams, now: float,
                 rng: random.Random | None = None) -> None:
        self.tsi = tsi
        self.inbox = inbox
        self.p = params
        self.rng = rng or random.Random()
        self.group = TxStream(0, None, now)
        self.peers: dict[bytes, Peer] = {}
        self.out: list[tuple[Addr | None, bytes]] = []
        self.events: list[Event] = []
        self.counters = Counters()
        self.max_payload = max(64, params.mtu - UDP_IP_OVERHEAD - DATA_OVERHEAD)
        self._last: tuple[bytes, list[bytes]] | None = None  # the group record being built
        self.banned: dict[bytes, float] = {}  # tsi -> until: peers closed by the router stay away

    # ------------------------------------------------------------------ sending

    def send_group(self, dest: bytes, frame: bytes) -> None:
        """Multicast `frame` for peer `dest`; the same frame sent next for other peers
        joins the same record (one datagram for all of them)."""
        last = self._last
        if last is not None and (last[0] is frame or last[0] == frame) and dest not in last[1] \
                and len(last[1]) < 255:
            last[1].append(dest)
            return
        self._seal()
        self._last = (frame, [dest])

    def _seal(self) -> None:
        if self._last is not None:
            frame, dests = self._last
            self._last = None
            self.group.add(encode_record(dests, frame))

    def send_unicast(self, dest: bytes, frame: bytes, now: float) -> None:
        peer = self.peers.get(dest)
        if peer is None:
            return
        if peer.tx is None:
            peer.tx = TxStream(self.rng.randrange(1, 1 << 32), peer.inbox, now)
        peer.tx.add(encode_record([], frame))

    def flush(self, now: float) -> None:
        """Cut what was sent since the last flush into data packets."""
        self._seal()
        for peer in self.peers.values():  # first: their packets carry the group lead before this cut
            if peer.tx is not None and peer.tx.pending:
                self._cut(peer.tx, now)
        self._cut(self.group, now)

    def _cut(self, tx: TxStream, now: float) -> None:
        buf, first = tx.pending, tx.first
        if not buf:
            return
        tx.pending = bytearray()
        tx.first = NO_RECORD
        size = self.max_payload
        unicast = tx.dest is not None
        glead = self.group.lead
        # a record that starts inside a packet: `first` is its offset there. Records
        # were appended whole, so the first record of each packet is found by walking
        starts = _record_starts(buf, first)
        si = 0
        for off in range(0, len(buf), size):
            while si < len(starts) and starts[si] < off:
                si += 1
            rel = starts[si] - off if si < len(starts) and starts[si] < off + size else NO_RECORD
            sqn = tx.next_sqn
            trail = tx.trail  # before this packet joins the window
            tx.next_sqn += 1
            pkt = encode_data(self.tsi, self.inbox, unicast, tx.sid, sqn, trail, glead,
                              rel, bytes(buf[off:off + size]))
            tx.window.append((sqn, now, pkt))
            self._emit(tx.dest, pkt)
            self.counters.odata += 1
        tx.expire(now, self.p)
        tx.ihb = IHB_MIN_S
        tx.spm_due = now + IHB_MIN_S

    def _emit(self, dest: Addr | None, pkt: bytes) -> None:
        self.out.append((dest, pkt))
        self.counters.bytes_out += len(pkt)

    def _spm(self, tx: TxStream) -> None:
        tx.spm_sqn += 1
        self._emit(tx.dest, encode_spm(self.tsi, self.inbox, tx.dest is not None, tx.sid, tx.spm_sqn, tx.trail,
                                       tx.lead, self.group.lead))
        self.counters.spm += 1

    # ------------------------------------------------------------------ timers

    def tick(self, now: float) -> None:
        self.flush(now)
        for tx in self._tx_streams():
            tx.expire(now, self.p)
            if now >= tx.spm_due:
                self._spm(tx)
                if tx.ihb:
                    tx.ihb *= 2
                    if tx.ihb >= SPM_AMBIENT_S:
                        tx.ihb = 0.0
                tx.spm_due = now + (tx.ihb or SPM_AMBIENT_S)
        for peer in list(self.peers.values()):
            if now - peer.heard > PEER_EXPIRY_S:
                self.forget(peer.tsi, f"silent for {now - peer.heard:.1f} s")
                continue
            for rx, uni in ((peer.group, False), (peer.uni, True)):
                if rx is not None and rx.missing:
                    self._naks(peer, rx, uni, now)

    def next_due(self) -> float:
        """When `tick` has work next (SPMs, NAKs)."""
        due = min(tx.spm_due for tx in self._tx_streams())
        for peer in self.peers.values():
            for rx in (peer.group, peer.uni):
                if rx is not None and rx.missing:
                    due = min(due, rx.due)
        return due

    def _tx_streams(self) -> list[TxStream]:
        return [self.group] + [p.tx for p in self.peers.values() if p.tx is not None]

    def _naks(self, peer: Peer, rx: RxStream, uni: bool, now: float) -> None:
        if now < rx.due:
            return
        ask: list[int] = []
        lost = 0
        due = INF
        rxw_secs = self.p.rxw_secs
        for sqn, m in list(rx.missing.items()):
            if now - m[3] > rxw_secs:
                lost += self._give_up(rx, sqn)
                continue
            if m[0] <= now:
                if m[2] >= NAK_RETRIES:
                    lost += self._give_up(rx, sqn)
                    continue
                m[1], m[0] = _WAIT_NCF, now + NAK_RPT_IVL_S
                m[2] += 1
                ask.append(sqn)
            due = min(due, m[0], m[3] + rxw_secs)
        rx.due = due
        for i in range(0, len(ask), MAX_SQNS):
            self._emit(peer.inbox, encode_nak(self.tsi, self.inbox, uni, peer.tsi, rx.sid, ask[i:i + MAX_SQNS]))
            self.counters.naks_sent += 1
        if lost:
            self._lost(peer, rx, uni, lost)

    def _give_up(self, rx: RxStream, sqn: int) -> int:
        del rx.missing[sqn]
        rx.gone.add(sqn)
        return 1

    def _lost(self, peer: Peer, rx: RxStream, uni: bool, count: int) -> None:
        self.counters.lost += count
        self.events.append(Loss(peer.tsi, uni, count))
        self._deliver(peer, rx)

    # ------------------------------------------------------------------ receiving

    def receive(self, data: bytes, now: float) -> None:
        self.counters.bytes_in += len(data)
        if data[4:12] == self.tsi:
            return  # our own, looped back (mcast_loop)
        try:
            pkt = decode(data)
        except PgmWireError:
            self.counters.bad += 1
            return
        if pkt.tsi == self.tsi:
            return  # our own, looped back
        peer = self.peers.get(pkt.tsi)
        if peer is None:
            if self.banned and self.banned.get(pkt.tsi, 0.0) > now:
                return
            if len(self.peers) >= MAX_PEERS:
                self.counters.peers_refused += 1
                return
            peer = self.peers[pkt.tsi] = Peer(pkt.tsi, pkt.inbox, now)
            self.events.append(PeerUp(pkt.tsi, pkt.inbox))
        peer.heard = now
        if pkt.type == NAK:
            self._on_nak(peer, pkt, now)
        elif pkt.type == NCF:
            rx = peer.group
            if rx is not None and rx.sid == pkt.sid:
                for sqn in pkt.sqns:
                    m = rx.missing.get(sqn)
                    if m is not None:
                        m[1], m[0] = _WAIT_DATA, now + NAK_RDATA_IVL_S
        else:
            rx = self._rx(peer, pkt)
            if rx is None:
                return
            if pkt.type == SPM:
                self._advance(peer, rx, pkt.unicast, pkt.trail, pkt.lead, now)
            else:
                self._on_data(peer, rx, pkt, now)
            self._deliver(peer, rx)

    def _rx(self, peer: Peer, pkt: Packet) -> RxStream | None:
        if pkt.unicast:
            rx = peer.uni
            if rx is None or rx.sid != pkt.sid:  # a new stream from this peer
                rx = peer.uni = RxStream(pkt.sid, FIRST_SQN)
            if pkt.type != SPM and peer.group is None:
                if pkt.sqn == FIRST_SQN:
                    peer.group = RxStream(0, pkt.glead + 1)
                else:
                    peer.glead_min = min(peer.glead_min, pkt.glead)
            return rx
        return peer.group

    def _advance(self, peer: Peer, rx: RxStream, uni: bool, trail: int, lead: int, now: float) -> None:
        """The source's window is [trail, lead]: note what is missing, give up on what
        left the window."""
        if lead > rx.lead:
            for sqn in range(max(rx.lead + 1, rx.next, lead - self.p.rxw_sqns + 1), lead + 1):
                if sqn not in rx.held:
                    nak_at = now + self.rng.uniform(0, NAK_BO_IVL_S)
                    rx.missing[sqn] = [nak_at, _BACKOFF, 0, now]
                    rx.due = min(rx.due, nak_at)
            rx.lead = lead
        floor = max(trail, lead - self.p.rxw_sqns + 1)
        if floor > rx.floor and floor > rx.next:
            # what is below the floor and not held is lost: counted without walking the
            # range (a trail may jump far), skipped at delivery (`_deliver`)
            start = max(rx.next, rx.floor)
            lost = (floor - start) - sum(1 for s in rx.held if start <= s < floor) \
                - sum(1 for s in rx.gone if start <= s < floor)
            rx.floor = floor
            for sqn in [s for s in rx.missing if s < floor]:
                del rx.missing[sqn]
            if lost:
                self.counters.lost += lost
                self.events.append(Loss(peer.tsi, uni, lost))

    def _on_data(self, peer: Peer, rx: RxStream, pkt: Packet, now: float) -> None:
        sqn = pkt.sqn
        if sqn < rx.next or sqn in rx.held:
            self.counters.dup += 1
            return
        if pkt.type == RDATA:
            self.counters.rdata += 1
        self._advance(peer, rx, pkt.unicast, pkt.trail, max(sqn - 1, rx.lead), now)
        rx.lead = max(rx.lead, sqn)
        rx.missing.pop(sqn, None)
        if sqn in rx.gone or sqn < rx.floor:
            return  # given up on (counted lost): too late
        if sqn >= rx.next:
            rx.held[sqn] = (pkt.payload, pkt.first)

    def _deliver(self, peer: Peer, rx: RxStream) -> None:
        frames: list[bytes] = []
        reader = rx.reader
        while True:
            nxt = rx.next
            item = rx.held.pop(nxt, None)
            if item is not None:
                for dests, frame in reader.feed(*item):
                    if not dests or self.tsi in dests:
                        frames.append(frame)
                    else:
                        self.counters.not_for_us += 1
            elif nxt in rx.gone:
                rx.gone.discard(nxt)
                reader.lose()
            elif nxt < rx.floor:  # lost below the window's floor: jump to what is held, or the floor
                reader.lose()
                later = [s for s in rx.held if s > nxt]
                rx.next = min(rx.floor, min(later)) if later else rx.floor
                rx.gone = {s for s in rx.gone if s >= rx.next}
                continue
            else:
                break
            rx.next = nxt + 1
        if frames:
            self.events.append(Frames(peer.tsi, frames))
        if peer.group is None and rx is peer.uni and rx.next > FIRST_SQN and peer.glead_min < INF:
            # the stream's first packet is lost for good (or the peer was found again
            # mid-stream): the group window starts after the earliest glead seen
            peer.group = RxStream(0, int(peer.glead_min) + 1)

    def _on_nak(self, peer: Peer, pkt: Packet, now: float) -> None:
        """A receiver asks us for repairs."""
        self.counters.naks_recv += 1
        if pkt.source != self.tsi:
            return
        if pkt.unicast:
            tx = peer.tx
            if tx is None or tx.sid != pkt.sid:
                return
        else:
            tx = self.group
        repaired: list[int] = []
        for sqn in pkt.sqns:
            odata = tx.packet(sqn)
            if odata is None:
                self.counters.nak_out_of_window += 1
                continue
            repaired.append(sqn)
            if now - tx.repaired.get(sqn, -1.0) < RDATA_HOLD_S:
                continue
            tx.repaired[sqn] = now
            self._emit(tx.dest, as_rdata(odata))
            self.counters.rdata_sent += 1
        if tx.dest is None and repaired:
            self._emit(None, encode_ncf(self.tsi, self.inbox, 0, repaired))
            self.counters.ncf += 1
        if len(repaired) < len(pkt.sqns):
            self._spm(tx)  # the receiver learns the trail now, not at the next ambient SPM

    def forget(self, tsi: bytes, reason: str) -> None:
        if self.peers.pop(tsi, None) is not None:
            self.events.append(PeerDown(tsi, reason))

    def ban(self, tsi: bytes, now: float, hold_s: float = PEER_EXPIRY_S) -> None:
        """Forget a peer the router closed; its packets are ignored for `hold_s`."""
        self.banned = {t: until for t, until in self.banned.items() if until > now}
        self.banned[tsi] = now + hold_s
        self.peers.pop(tsi, None)

    def take(self) -> tuple[list[tuple[Addr | None, bytes]], list[Event]]:
        out, self.out = self.out, []
        events, self.events = self.events, []
        return out, events


def _record_starts(buf: bytearray, first: int) -> list[int]:
    """The offsets of the records in a buffer of whole records starting at `first`."""
    starts: list[int] = []
    pos = first
    n = len(buf)
    while first != NO_RECORD and pos < n:
        starts.append(pos)
        length = int.from_bytes(buf[pos:pos + 4], "big")
        pos += 5 + buf[pos + 4] * 8 + length
    return starts
