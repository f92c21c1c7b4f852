"""Fuzz every parser that reads bytes from the network or a file: only typed errors,
no hang, no escaped exception.

    python bench/fuzz.py [--quick] [--n N] [--only wire,nats] [--seed S] [--save DIR]

Targets: wire (frame decode, header peek), stream (the frame reader), handshake (a
node's Handshake.receive), router (Node.on_frame on a link not yet authenticated;
the node counts any escaped exception as internal_errors), router_signed (frames
re-signed with their source's key, so that they reach the router's decoders), nats
(NatsParser), resp (RespParser), config (YAML/JSON configuration text), names (the
name service's requests and replication frames), pgm (a PGM datagram decoded and received
by a core that knows its sender), rv (rvmsgs decoded and fed to an RV
session). Each gets N inputs (default
200,000; --quick 5,000): a third generated from scratch (random bytes, random token
sequences for the text protocols, random frames built with the real encoder), the
rest mutated from a seed corpus of genuine inputs (frames captured from a simulated
network, protocol sessions, the manual's configurations) by bit flips, interesting
values, inserts, deletes, duplications, splices and truncations.

A raised `RaimsError` (every package's typed error) is a pass; `typed_errors` counts
them, and for handshake and router the rejections returned or counted instead. Anything else, or an
input that takes longer than HANG_S, is a crash: printed, written to --save DIR
(default tests/fixtures/fuzz/, where tests/unit/test_fuzz_regressions.py replays
every file), and the exit status is 1. Deterministic for a seed. Atheris would need
a clang toolchain here; hypothesis drives the unit tests' property checks instead,
whose per-example cost is too high for 200,000 inputs per parser.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raims_node import RaimsError  # noqa: E402
from raims_node.bridges import sbus_proto  # noqa: E402
from raims_node.bridges.nats_proto import NatsParser  # noqa: E402
from raims_node.bridges.resp import RespParser  # noqa: E402
from raims_node.bridges.rv_codec import VERSION_REC as RV_VERSION_REC  # noqa: E402
from raims_node.bridges.rv_codec import RvFrameReader, Writer, info_rec  # noqa: E402
from raims_node.bridges.rv_codec import decode as rv_decode  # noqa: E402
from raims_node.bridges.rv_session import RvConfig, RvSession  # noqa: E402
from raims_node.config.tree import load_text  # noqa: E402
from raims_node.crypto.handshake import Handshake, Rejected  # noqa: E402
from raims_node.crypto.mac import MacKey  # noqa: E402
from raims_node.kv.commands import COMMANDS as KV_COMMANDS  # noqa: E402
from raims_node.kv.commands import Engine, KVClient  # noqa: E402
from raims_node.kv.store import KVStore  # noqa: E402
from raims_node.router.actions import Send  # noqa: E402
from raims_node.router.node import Node  # noqa: E402
from raims_node.transports.pgm_wire import PgmWireError, decode  # noqa: E402
from raims_node.wire import (  # noqa: E402
    DIGEST_LEN,
    DIGEST_OFFSET,
    FID_TYPES,
    FieldType,
    FrameReader,
    MsgType,
    decode_frame,
    encode_frame,
    peek,
)
from tests.unit.test_pgm_core import Lan as PgmLan  # noqa: E402

HANG_S = 2.0
DEFAULT_N = 200_000
QUICK_N = 5_000
MAX_INPUT = 16 * 1024
INTERESTING = (0, 1, 0x7F, 0x80, 0xFF)
INTERESTING_WIDE = (b"\xff\xff", b"\x00\x00", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\xff\xff\xff\xff")
NATS_TOKENS = [b"PUB ", b"HPUB ", b"SUB ", b"UNSUB ", b"CONNECT ", b"PING", b"PONG", b"MSG ", b"+OK", b"-ERR ",
               b"\r\n", b" ", b"\t", b"a.b", b"*", b">", b"0", b"5", b"-1", b"99999999999999999999", b"{", b"}",
               b'{"verbose":true}', b"NATS/1.0\r\n", b"hello", b"\x00", b"\xff"]
RESP_TOKENS = [b"*", b"$", b"+", b"-", b":", b"%", b"~", b"_", b"\r\n", b"\n", b"-1", b"0", b"3", b"99999999999",
               b"SET", b"GET", b"PUBLISH", b"SUBSCRIBE", b"PSUBSCRIBE", b"ping", b'"', b"'", b"\\x4", b" ", b"a"]
NAMES_KEYS = ["type", "lower", "upper", "instance", "scope", "inbox", "port", "sub", "domain", "timeout_ms",
              "reply", "op", "seq", "pubs", "removed"]
YAML_TOKENS = ["\n", "  ", "- ", ": ", "{", "}", "[", "]", ",", "'", '"', "&a ", "*a", "!!python/object ", "? ",
               "|", ">", "#", "%YAML 1.1\n", "---\n", "...\n", "tport", "type: tcp", "route:", "port: 99999",
               "parameters:", "heartbeat: 1 sec", "include: x.yaml", "users:", "services:", "svc: t", "null",
               "~", "1e9", "-1", "0x10", ".inf", "<<: *a", "\t", "\x00", "\u2028"]


class Hang(Exception):
    pass


@dataclass
class Result:
    target: str
    inputs: int = 0
    typed_errors: int = 0
    crashes: list[tuple[str, bytes]] = field(default_factory=list)
    seconds: float = 0.0


# ------------------------------------------------------------------ seed corpus


def _sim_frames() -> list[bytes]:
    """Frames a small simulated network sends: HELLO/HB, auth, _Z/_S/_P, inbox RPCs,
    multicast data."""
    from raims_node.router.sim import SimNetwork
    from tests.sim.conftest import creds_factory

    frames: list[bytes] = []

    class Recording(SimNetwork):
        def _send(self, who: str, act: Send) -> None:
            if len(frames) < 4000:
                frames.append(bytes(act.data))
            super()._send(who, act)

    net = Recording(creds_factory(), seed=7)
    for name in "ABC":
        net.add_node(name)
    net.add_link("ab", "A", "B")
    net.add_link("bc", "B", "C")
    net.run_until(net.converged, timeout_ns=10 * 10**9)
    net.subscribe("C", "data.x")
    net.psubscribe("C", "data.>")
    net.run_for(10**9)
    for i in range(20):
        net.publish("A", f"data.{i % 3}", b"p" * i)
    net.run_for(3 * 10**9)
    return frames


def _nats_seeds() -> list[bytes]:
    return [
        b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"name":"x"}\r\nPING\r\n',
        b"PUB a.b 5\r\nhello\r\nPUB a.b reply.x 0\r\n\r\n",
        b"HPUB a.b 22 27\r\nNATS/1.0\r\nA: b\r\n\r\nhello\r\n",
        b"SUB a.* 1\r\nSUB a.> q 2\r\nUNSUB 1\r\nUNSUB 2 10\r\n",
        b"PING\r\nPONG\r\n+OK\r\n-ERR 'x'\r\nMSG a 1 3\r\nabc\r\n",
        b"pub lower.case 1\r\nx\r\nsub x 3\r\n",
    ]


def _resp_seeds() -> list[bytes]:
    return [
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n",
        b"*2\r\n$9\r\nSUBSCRIBE\r\n$3\r\na.b\r\n*1\r\n$4\r\nPING\r\n",
        b'PUBLISH "a b" \'c\\x41\'\r\nping\r\n',
        b"*3\r\n$7\r\nPUBLISH\r\n$1\r\nx\r\n$-1\r\n",
        b"HELLO 3\r\n*2\r\n$10\r\nPSUBSCRIBE\r\n$3\r\na.*\r\n",
    ]


def _kv_seeds() -> list[bytes]:
    """Data commands of the key-value map, RESP-encoded (the `kv` target)."""
    commands = [
        [b"SET", b"k", b"v", b"EX", b"10", b"NX"], [b"GETEX", b"k", b"PX", b"5"], [b"INCRBYFLOAT", b"n", b"1.5e3"],
        [b"LPUSH", b"l", b"a", b"b"], [b"LRANGE", b"l", b"0", b"-1"], [b"BLPOP", b"l", b"0.01"],
        [b"HSET", b"h", b"f", b"v"], [b"SADD", b"s", b"x"], [b"SINTERSTORE", b"d", b"s", b"t"],
        [b"ZADD", b"z", b"GT", b"CH", b"1.5", b"m"], [b"ZRANGE", b"z", b"(1", b"+inf", b"BYSCORE", b"LIMIT", b"0", b"2"],
        [b"ZUNIONSTORE", b"d", b"2", b"z", b"s", b"WEIGHTS", b"2", b"3"], [b"SCAN", b"0", b"MATCH", b"*[a-", b"COUNT", b"5"],
        [b"KEYS", b"a*a*a*a*a*b"], [b"EXPIRE", b"k", b"-1", b"GT"], [b"RENAME", b"k", b"k2"], [b"SETRANGE", b"k", b"9", b"x"],
        [b"GETRANGE", b"k", b"-5", b"99"], [b"LMOVE", b"l", b"m", b"LEFT", b"RIGHT"], [b"SELECT", b"3"],
    ]
    return [b"".join(b"*%d\r\n" % len(c) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in c) for c in commands[i::4])
            for i in range(4)]


def _names_seeds() -> list[bytes]:
    """Name service requests (a verb byte, then the JSON body) and replication frames."""
    bodies = [{"type": 1000, "lower": 1, "upper": 5, "scope": "cluster", "port": 7},
              {"type": 1000, "instance": 3, "domain": "node"}, {"type": 0, "lower": 0, "upper": 2**32 - 1},
              {"type": 5, "lower": 1, "upper": 1, "timeout_ms": 100, "sub": "s1"}, {"inbox": "_INBOX.x"}]
    out = [bytes([i + 1]) + json.dumps(b).encode() for i, b in enumerate(bodies)]
    out.append(b"\x00" + json.dumps({"op": "dump", "seq": 1, "pubs": [[1000, 1, 5, 7, 0, 1]]}).encode())
    return out


def _rv_seeds() -> list[bytes]:
    """An RV client's messages after the session records: init, listens, data."""
    init = Writer().string("mtype", "I").string("userid", "u").string("service", "7500").string("network", "")
    data = Writer().int32("n", 1).opaque("o", b"x" * 130).string("s", "text").finish()
    return [
        init.finish() + Writer().string("mtype", "I").string("session", "0A000001.GOB").string("service", "7500")
        .finish(),
        Writer().string("mtype", "L").subject("sub", "A.*.>").string("return", "_INBOX.x.1").finish(),
        Writer().subject("sub", "A.B").string("mtype", "D").string("return", "_INBOX.x.2").message("data", data)
        .finish(),
        Writer().string("mtype", "C").subject("sub", "A.*.>").finish() + bytes.fromhex("000000089955eeaa"),
    ]


class _RvHost:
    """The transport a fuzzed RV session sees: every service opens on a bus that
    routes nothing (the bus is not under test here)."""

    ipaddr = b"\x0a\x00\x00\x01"
    port = 7500
    daemon_gob = "G"

    def open_service(self, service: str, network: str) -> _RvHost:
        return self

    def closed_service(self, service: str) -> None:
        pass

    def subscribe(self, *args: object) -> None:
        pass

    psubscribe = unsubscribe = drop_client = subscribe

    def publish(self, *args: object) -> int:
        return 0


def _config_seeds() -> list[bytes]:
    from raims_node.config.gen_key import new_network_config
    from raims_node.config.tree import dump_yaml

    seeds = [dump_yaml(new_network_config("fz", ["A", "B"])).encode()]
    for p in sorted((ROOT / "tests" / "configs").rglob("*")):
        if p.is_file() and p.suffix in (".yaml", ".json"):
            seeds.append(p.read_bytes())
    seeds.append(b"parameters:\n  heartbeat: 5 secs\n  pub_window_size: 1 MB\n"
                 b"transports:\n  - tport: t\n    type: tcp\n    route:\n      listen: '*'\n      port: 5000\n")
    return seeds


# ------------------------------------------------------------------ generators and mutators


def _random_frame(rng: random.Random) -> bytes:
    """A well-formed frame of random type, subject and fields (typed as the fid says)."""
    fields: list[tuple[int, object]] = []
    fids = list(FID_TYPES)
    for _ in range(rng.randrange(8)):
        fid = rng.choice(fids)
        t = rng.choice(FID_TYPES[fid])
        if t == FieldType.BOOL:
            value: object = rng.random() < 0.5
        elif t in (FieldType.U16, FieldType.U32, FieldType.U64):
            value = rng.randrange(1 << (16 if t == FieldType.U16 else 32 if t == FieldType.U32 else 64))
        elif t == FieldType.STRING:
            value = "".join(rng.choice("ab._*>") for _ in range(rng.randrange(12)))
        else:
            sizes: dict[int, int] = {FieldType.OPAQUE16: 16, FieldType.OPAQUE32: 32, FieldType.OPAQUE64: 64}
            value = rng.randbytes(sizes.get(t, rng.randrange(64)))
        fields.append((fid, value))
    subject = rng.choice(["_X.HELLO", "_X.HB", "_X.BYE", "_I.AAAAAAAAAAAAAAAAAAAAAA.auth", "_Z.ADD", "_S.JOIN.a",
                          "_P.PSUB.a.b", "_I.x.sync_req", "data.x"])
    try:
        return bytes(encode_frame(rng.choice(list(MsgType)), subject, rng.randbytes(16), fields))
    except RaimsError:
        return rng.randbytes(rng.randrange(64))


def _generate(rng: random.Random, target: str) -> bytes:
    if target == "names" and rng.random() < 0.5:
        body: dict[str, object] = {rng.choice(NAMES_KEYS): rng.choice([None, True, -1, 0, 7, 2**40, "x", 1.5, [], {}])
                for _ in range(rng.randrange(6))}
        return bytes([rng.randrange(256)]) + json.dumps(body).encode()
    if target in ("nats", "resp", "config") and rng.random() < 0.8:
        if target == "config":
            return "".join(rng.choice(YAML_TOKENS) for _ in range(rng.randrange(1, 60))).encode()
        tokens = NATS_TOKENS if target == "nats" else RESP_TOKENS
        return b"".join(rng.choice(tokens) for _ in range(rng.randrange(1, 40)))
    if target in ("wire", "handshake", "router") and rng.random() < 0.6:
        return _random_frame(rng)
    return rng.randbytes(rng.randrange(rng.choice((16, 256, 2048))))


def mutate(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    buf = bytearray(data)
    for _ in range(1 + int(rng.expovariate(0.7))):
        op = rng.randrange(9)
        n = len(buf)
        if op == 0 and n:  # bit flip
            buf[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # interesting byte
            buf[rng.randrange(n)] = rng.choice(INTERESTING)
        elif op == 2 and n >= 2:  # interesting wide value (lengths, sizes)
            v = rng.choice(INTERESTING_WIDE)
            i = rng.randrange(n)
            buf[i : i + len(v)] = v
        elif op == 3:  # insert random bytes
            i = rng.randrange(n + 1)
            buf[i:i] = rng.randbytes(rng.randrange(1, 9))
        elif op == 4 and n:  # delete a range
            i = rng.randrange(n)
            del buf[i : i + rng.randrange(1, 17)]
        elif op == 5 and n:  # duplicate a range
            i = rng.randrange(n)
            j = min(n, i + rng.randrange(1, 33))
            buf[j:j] = buf[i:j]
        elif op == 6:  # splice with another seed
            other = rng.choice(corpus)
            i, j = rng.randrange(n + 1), rng.randrange(len(other) + 1)
            buf = buf[:i] + other[j:]
        elif op == 7 and n:  # truncate
            del buf[rng.randrange(n) :]
        elif op == 8 and n:  # a byte set to an ASCII digit (text lengths)
            buf[rng.randrange(n)] = rng.choice(b"0123456789-")
    return bytes(buf[:MAX_INPUT])


# ------------------------------------------------------------------ targets


def _chunks(rng: random.Random, data: bytes) -> list[bytes]:
    if len(data) < 2 or rng.random() < 0.5:
        return [data]
    cut = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randrange(1, 4))))
    return [data[i:j] for i, j in zip([0, *cut], [*cut, len(data)], strict=True)]


def _targets(rng: random.Random) -> dict[str, Callable[[bytes], object]]:
    from tests.sim.conftest import creds_factory

    creds = creds_factory()
    hs = Handshake(creds("A"), b"\x01" * 16, interval_s=1)

    def wire(data: bytes) -> None:
        peek(data)
        decode_frame(data).as_dict()

    def stream(data: bytes) -> None:
        reader = FrameReader()
        for chunk in _chunks(rng, data):
            reader.feed(chunk)

    def handshake(data: bytes) -> bool:
        return any(isinstance(ev, Rejected) for ev in hs.receive(time.time_ns(), data))

    node = Node(creds("B"), now_ns=time.time_ns(), rng=random.Random(1))
    tport = node.add_transport("t", "tcp", (100, 100, 100, 100))
    node.on_connect(1, tport, time.time_ns())

    def router(data: bytes) -> bool:
        c = node.counters
        before, refused = c.internal_errors, c.bad_frames + c.auth_rejected + sum(c.rejects.values())
        node.on_frame(1, data, time.time_ns())
        if c.internal_errors != before:
            raise AssertionError("the node counted an internal error (an escaped exception)")
        return c.bad_frames + c.auth_rejected + sum(c.rejects.values()) != refused

    def nats(data: bytes) -> None:
        parser = NatsParser()
        for chunk in _chunks(rng, data):
            parser.feed(chunk)

    def resp(data: bytes) -> None:
        parser = RespParser()
        for chunk in _chunks(rng, data):
            parser.feed(chunk)

    def config(data: bytes) -> None:
        load_text(data.decode("utf-8", "replace"), "<fuzz>")

    signed = _SignedRouter()
    from raims_node.names.service import NameService

    names_svc = NameService(b"A" * 16, "A", 0)
    names_svc.node_event("peer_up", b"B" * 16, "B", b"", 0)

    def names(data: bytes) -> None:
        """A `_NAMES.<verb>` request body (first byte picks the verb) or a names frame."""
        if not data:
            return
        pick = data[0] % (len(NAMES_VERBS) + 1)  # 0: a frame, else a request verb
        if pick == 0:
            names_svc.node_event("names", b"B" * 16, "B", data[1:], 0)
        else:
            names_svc.request("c", "_nats.", NAMES_VERBS[pick - 1], "r", None, data[1:], 0)

    def sbus(data: bytes) -> None:
        """One sbus packet (seed 001), and the key and pattern mappings it may go through."""
        sbus_proto.parse(data)
        sbus_proto.network_sub(data)
        sbus_proto.key_creds(data)
        sbus_proto.subject_of(data)

    engine = Engine(KVStore(databases=4))
    kv_client = KVClient()

    def kv(data: bytes) -> None:
        """RESP-framed data commands run on a key-value map; a handler that raises is a
        crash even though the engine answers it with an error."""
        parser = RespParser()
        for chunk in _chunks(rng, data):
            for args in parser.feed(chunk):
                if args and args[0].lower() in KV_COMMANDS:
                    before = engine.internal_errors
                    engine.execute(kv_client, args)
                    if kv_client.blocked is not None:  # a blocking pop parks: give up as a timeout would
                        engine.unblock(kv_client)
                    if engine.internal_errors != before:
                        raise AssertionError(f"kv command {args[0]!r} raised inside its handler")

    pgm_lan = _pgm_lan()

    def pgm(data: bytes) -> bool:
        """One PGM datagram (transports/pgm_wire.py) decoded, then received by a core
        that knows the sender (its windows, NAK timers and record reader run on it);
        True when the parser refused it (a typed error, which the core counts)."""
        refused = False
        try:
            decode(data)
        except PgmWireError:
            refused = True
        core = pgm_lan.cores[1]
        before = core.counters.bad
        core.receive(data, pgm_lan.now)
        core.tick(pgm_lan.now + 0.5)
        core.take()
        if refused != (core.counters.bad != before) and data[4:12] != core.tsi:
            raise AssertionError("the core and the parser disagree on a datagram")
        return refused

    rv_host = _RvHost()

    def rv(data: bytes) -> bool:
        """rvmsgs (the header's size fixed up half the time, so that mutations reach the
        fields): decoded whole, then fed to an RV session past its session records; a
        session closed for anything but a typed error is a crash."""
        buf = bytearray(data)
        if len(buf) >= 8 and rng.random() < 0.5:
            buf[0:4] = len(buf).to_bytes(4, "big")
        reader = RvFrameReader(1 << 20)
        reader.push(bytes(buf))
        try:
            for frame in reader.frames():
                rv_decode(frame).to_dict()
        except RaimsError:
            pass
        session = RvSession(rv_host, 1, RvConfig())  # type: ignore[arg-type]
        session.data_received(RV_VERSION_REC + info_rec(3))
        for chunk in _chunks(rng, bytes(buf)):
            session.data_received(chunk)
        if session.closing and not isinstance(session.close_error, RaimsError):
            raise AssertionError(f"RV session closed with {session.close_error!r}")
        return session.closing  # a typed rejection

    return {"wire": wire, "stream": stream, "handshake": handshake, "router": router, "router_signed": signed,
            "nats": nats, "resp": resp, "config": config, "names": names, "sbus": sbus, "kv": kv, "rv": rv, "pgm": pgm}


def _pgm_lan() -> PgmLan:
    from raims_node.transports.pgm_core import PgmParams

    lan = PgmLan(2, PgmParams(mtu=1500))
    lan.run(1.0)
    return lan


def _pgm_seeds() -> list[bytes]:
    """Datagrams of a simulated two-node PGM exchange: SPMs, data (records spanning
    packets), NAKs, NCFs and repairs under 10 % loss."""
    from raims_node.transports.pgm_core import PgmParams

    captured: list[bytes] = []
    rng = random.Random(3)

    def drop(src: int, dst: int, pkt: bytes) -> bool:
        captured.append(pkt)
        return rng.random() < 0.1

    lan = PgmLan(2, PgmParams(mtu=1500), drop=drop)
    lan.run(1.0)
    for k in range(60):
        lan.publish(0, b"\x00" + bytes(k * 50))
    lan.run(2.0)
    return captured[:400]


class _SignedRouter:
    """Node B of a converged A-B-C simulation, fed mutated frames re-signed with the
    session key of their source, so that they pass the MAC and reach the decoders of
    broadcasts, subscriptions, inbox RPCs and data; rebuilt every REBUILD inputs (the
    garbage it accepts changes its state)."""

    REBUILD = 20_000

    def __init__(self) -> None:
        self.count = 0
        self._build()

    def _build(self) -> None:
        from raims_node.router.sim import SimNetwork
        from tests.sim.conftest import creds_factory

        net = SimNetwork(creds_factory(), seed=7)  # as _sim_frames: the same bridges and keys
        for name in "ABC":
            net.add_node(name)
        net.add_link("ab", "A", "B")
        net.add_link("bc", "B", "C")
        net.run_until(net.converged, timeout_ns=10 * 10**9)
        self.node = net.nodes["B"].node
        self.conn = net.links["ab"].conn_b
        self.keys = {s.node.bridge: MacKey(s.node.session_key) for s in net.nodes.values()}

    def __call__(self, data: bytes) -> bool:
        self.count += 1
        if self.count % self.REBUILD == 0:
            self._build()
        frame = bytearray(data)
        try:
            head = peek(frame)
            key = self.keys.get(head.bridge)
            if key is not None and len(frame) >= DIGEST_OFFSET + DIGEST_LEN:
                key.sign(frame)
            if head.subject == b"_X.BYE":
                return True  # would end the session this target needs
        except RaimsError:
            pass
        c = self.node.counters
        before, refused = c.internal_errors, c.bad_frames + c.bad_mac + c.auth_rejected + sum(c.rejects.values())
        self.node.on_frame(self.conn, bytes(frame), time.time_ns())
        if c.internal_errors != before:
            raise AssertionError("the node counted an internal error (an escaped exception)")
        return c.bad_frames + c.bad_mac + c.auth_rejected + sum(c.rejects.values()) != refused


CORPUS_OF = {"wire": "frames", "stream": "frames", "handshake": "frames", "router": "frames",
             "router_signed": "frames", "nats": "nats", "resp": "resp", "config": "config", "names": "names",
             "sbus": "sbus", "kv": "kv", "pgm": "pgm", "rv": "rv"}
NAMES_VERBS = ["BIND", "UNBIND", "LOOKUP", "INQUIRE", "SUBSCRIBE", "UNSUBSCRIBE", "TO.1.2", "MCAST.1.2.3"]


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang(f"input took longer than {HANG_S} s")


def run_target(name: str, fn: Callable[[bytes], object], corpus: list[bytes], n: int, rng: random.Random,
               max_crashes: int = 20) -> Result:
    res = Result(name)
    signal.signal(signal.SIGALRM, _on_alarm)
    t0 = time.perf_counter()
    generate_every = 3
    for i in range(n):
        data = _generate(rng, name) if i % generate_every == 0 else mutate(rng, rng.choice(corpus), corpus)
        signal.setitimer(signal.ITIMER_REAL, HANG_S)
        try:
            if fn(data) is True:  # a rejection returned (handshake) or counted (router)
                res.typed_errors += 1
        except RaimsError:
            res.typed_errors += 1
        except RecursionError as exc:  # noqa: PERF203
            res.crashes.append((f"RecursionError: {str(exc)[:80]}", data))
        except Exception as exc:  # anything untyped (or a hang) is a crash
            res.crashes.append((f"{type(exc).__name__}: {str(exc)[:120]}", data))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        res.inputs += 1
        if len(res.crashes) >= max_crashes:
            break
    res.seconds = time.perf_counter() - t0
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_N:,} inputs per parser")
    ap.add_argument("--n", type=int, default=None, help=f"inputs per parser (default {DEFAULT_N:,})")
    ap.add_argument("--only", default="", help="comma-separated targets")
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--save", default=str(ROOT / "tests" / "fixtures" / "fuzz"), help="where crashes are written")
    args = ap.parse_args(argv)
    n = args.n or (QUICK_N if args.quick else DEFAULT_N)
    rng = random.Random(args.seed)
    corpora = {"frames": _sim_frames(), "nats": _nats_seeds(), "resp": _resp_seeds(), "config": _config_seeds(),
               "names": _names_seeds(), "kv": _kv_seeds(), "pgm": _pgm_seeds(), "rv": _rv_seeds(),
               "sbus": [b"SUB a/*/c/", b"UNSUB ", b"MSG a/b/c/ payload", b"CMSG !/cred/whoami", b"SUB !/cred/0/0/1/x"]}
    targets = _targets(rng)
    only = [t for t in args.only.split(",") if t] or list(targets)
    results = [run_target(t, targets[t], corpora[CORPUS_OF[t]], n, rng) for t in only]
    rows = []
    crashed = False
    for r in results:
        rows.append({"parser": r.target, "inputs": r.inputs, "typed_errors": r.typed_errors,
                     "crashes": len(r.crashes), "seconds": round(r.seconds, 1),
                     "inputs_per_s": round(r.inputs / r.seconds) if r.seconds else 0})
        for what, data in r.crashes:
            crashed = True
            digest = hashlib.sha256(data).hexdigest()[:16]
            path = Path(args.save) / f"{r.target}-{digest}.bin"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            print(f"CRASH {r.target}: {what} -> {path}", file=sys.stderr)
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for row in rows:
        print("  ".join(str(row[c]).ljust(width[c]) for c in cols))
    print(json.dumps({"bench": "fuzz", "seed": args.seed, "results": rows}))
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
