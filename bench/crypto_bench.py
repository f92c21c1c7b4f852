"""Crypto throughput: message MAC sign/verify, full handshakes, AES-CTR link encryption.

Targets (one core): MAC verify of a 100-byte frame >= 500,000/s (issue 3). The other
figures have no target; they size how many peers a node can authenticate per second
and how fast an encrypted TCP link can go. Each measurement is bounded to a few
seconds, the whole run to well under a minute.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from raims_node.config import tree  # noqa: E402
from raims_node.config.gen_key import new_network_config  # noqa: E402
from raims_node.config.keyset import ServiceKeys  # noqa: E402
from raims_node.crypto.handshake import Handshake, Send  # noqa: E402
from raims_node.crypto.kdf import SALT_LEN, Kdf  # noqa: E402
from raims_node.crypto.link_cipher import LinkCipher  # noqa: E402
from raims_node.crypto.mac import MacKey  # noqa: E402
from raims_node.wire import Fid, MsgType, encode_frame  # noqa: E402

from _report import rate, report  # noqa: E402

N_MAC = 200_000
N_HANDSHAKE = 200
LINK_MB = 64
CHUNK = 64 * 1024
MAC_TARGET = 500_000


def _frame(size: int) -> bytearray:
    """A multicast frame of exactly `size` bytes (the payload pads it)."""
    empty = encode_frame(MsgType.MCAST, "RSF.EQUITY.IBM.N", bytes(range(16)), [(Fid.SEQNO, 1), (Fid.DATA, b"")])
    pad = bytes(size - len(empty))
    return encode_frame(MsgType.MCAST, "RSF.EQUITY.IBM.N", bytes(range(16)), [(Fid.SEQNO, 1), (Fid.DATA, pad)])


def _handshake(keys: ServiceKeys) -> None:
    now = time.time_ns()
    a = Handshake(keys.credentials("A"), os.urandom(16), now)
    b = Handshake(keys.credentials("B"), os.urandom(16), now)
    queue = [(b, a, bytes(a.hello(now)))]
    while queue:
        dst, src, frame = queue.pop()
        for ev in dst.receive(now, frame):
            if isinstance(ev, Send):
                queue.append((src, dst, ev.frame))
    assert a.peer(b.bridge).session_key == b.session_key  # type: ignore[union-attr]


def _link_mb_per_s() -> float:
    kdf = Kdf(os.urandom(SALT_LEN))
    a, b = LinkCipher(kdf), LinkCipher(kdf)
    a.feed(b.hello)
    b.feed(a.hello)
    chunk = os.urandom(CHUNK)
    n = LINK_MB * (1 << 20) // CHUNK
    t0 = time.perf_counter()
    for _ in range(n):
        b.feed(a.encrypt(chunk))
    # each byte is encrypted once and decrypted once: count the link's payload
    return LINK_MB / (time.perf_counter() - t0)


def main() -> None:
    key = MacKey(os.urandom(32))
    rows: list[dict[str, object]] = []
    for size in (100, 1024):
        frame = _frame(size)
        assert len(frame) == size
        key.sign(frame)
        raw = bytes(frame)
        sign_rate = rate(lambda: key.sign(frame), N_MAC)  # noqa: B023 - used within the iteration
        verify_rate = rate(lambda: key.verify(raw), N_MAC)  # noqa: B023
        target = MAC_TARGET if size == 100 else None
        rows.append({"op": f"mac_sign_{size}B", "per_s": sign_rate, "target": None, "meets_target": None})
        rows.append({"op": f"mac_verify_{size}B", "per_s": verify_rate, "target": target,
                     "meets_target": None if target is None else verify_rate >= target})
    keys = ServiceKeys.from_tree(tree.from_dict(new_network_config("bench", ["A", "B"])))
    rows.append({"op": "handshake_4_msgs", "per_s": rate(lambda: _handshake(keys), N_HANDSHAKE, repeat=2),
                 "target": None, "meets_target": None})
    rows.append({"op": "aes128_ctr_link_MB", "per_s": _link_mb_per_s(), "target": None, "meets_target": None})
    report("crypto", rows)


if __name__ == "__main__":
    main()
