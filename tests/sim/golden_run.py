"""A fixed 16-node simulation whose every frame is recorded: the golden record that
locks the router's behaviour across refactors (tests/sim/test_golden_frames.py).

Run as `python -m tests.sim.golden_run` with PYTHONHASHSEED=0: the handshake's random
nonces and X25519 keys come from a seeded generator here, so the same code sends the same
bytes. Prints the frame count, a SHA-256 of (time, sender, connection, bytes) of every
frame in order, and the number of deliveries.
"""

from __future__ import annotations

import hashlib
import os
import random

from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from raims_node.config import keyset
from raims_node.crypto import handshake, keys
from raims_node.router.actions import Send
from raims_node.router.node import NS
from raims_node.router.sim import MS, SimNetwork
from tests.sim.conftest import USERS, creds_factory

_rng = random.Random(2026)


class _SeededX25519:
    from_private_bytes = staticmethod(x25519.X25519PrivateKey.from_private_bytes)

    @staticmethod
    def generate() -> x25519.X25519PrivateKey:
        return x25519.X25519PrivateKey.from_private_bytes(_rng.randbytes(32))


class _SeededEd25519:
    from_private_bytes = staticmethod(ed25519.Ed25519PrivateKey.from_private_bytes)

    @staticmethod
    def generate() -> ed25519.Ed25519PrivateKey:
        return ed25519.Ed25519PrivateKey.from_private_bytes(_rng.randbytes(32))


class _FixedTime:
    @staticmethod
    def time_ns() -> int:
        return 1_700_000_000 * 10**9


def _seeded_urandom(n: int) -> bytes:
    return _rng.randbytes(n)


def run() -> tuple[int, str, int]:
    os.urandom = _seeded_urandom  # type: ignore[assignment]
    handshake.X25519PrivateKey = keys.X25519PrivateKey = _SeededX25519  # type: ignore[assignment,misc]
    keys.Ed25519PrivateKey = _SeededEd25519  # type: ignore[assignment,misc]
    keyset.time = _FixedTime  # type: ignore[assignment]
    names = USERS[:16]
    net = SimNetwork(creds_factory("test", tuple(USERS[:40])), seed=16)
    digest = hashlib.sha256()
    count = 0
    send = net._send

    def record(who: str, act: Send) -> None:
        nonlocal count
        count += 1
        digest.update(b"%d %s %d %d " % (net.now, who.encode(), act.conn_id, len(act.data)) + bytes(act.data))
        send(who, act)

    net._send = record  # type: ignore[method-assign]
    rng = random.Random(16)
    for name in names:
        net.add_node(name, start_offset_ns=rng.randrange(10**9))
    for i in range(16):
        net.add_link(f"r{i}", names[i], names[(i + 1) % 16], latency_ns=rng.randrange(1, 4) * MS)
    for i in range(0, 16, 3):
        net.add_link(f"c{i}", names[i], names[(i + 5) % 16], (200,) * 4, latency_ns=2 * MS)
    net.run_until(net.converged, timeout_ns=30 * NS)
    for i, name in enumerate(names):
        net.subscribe(name, f"topic.{i % 5}")
        net.psubscribe(name, f"wild.{i % 3}.>")
    net.run_for(2 * NS)
    for i in range(300):
        net.publish(names[i % 16], f"topic.{i % 5}" if i % 2 else f"wild.{i % 3}.x{i}", b"p%d" % i)
        if i % 10 == 0:
            net.run_for(MS)
    net.run_for(3 * NS)
    net.kill(names[5])
    net.run_for(5 * NS)
    return count, digest.hexdigest(), sum(len(s.delivered) for s in net.nodes.values())


if __name__ == "__main__":
    print(*run())
