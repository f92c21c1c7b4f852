"""Wire codec throughput: encode, full decode and the router fast path.

A typical multicast frame: 40-byte subject, seqno, stamp, 100-byte payload. The peer
measured in the same run is the stdlib json codec on the same content, to give the
figures a same-machine yardstick. Targets (one core): fast path >= 1,000,000 frames/s,
full decode >= 200,000/s, encode >= 250,000/s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from raims_node.wire import Fid, MsgType, decode_frame, encode_frame, peek  # noqa: E402

from _report import rate, report  # noqa: E402

N = 200_000
SUBJECT = "RSF.EQUITY.IBM.N.LEVEL1.QUOTES.012345678"  # 40 bytes
BRIDGE = bytes(range(16))
PAYLOAD = bytes(range(100))
STAMP = 1663967313973571299


def main() -> None:
    assert len(SUBJECT) == 40
    fields = [(Fid.SEQNO, 12345), (Fid.STAMP, STAMP), (Fid.DATA, PAYLOAD)]
    frame = bytes(encode_frame(MsgType.MCAST, SUBJECT, BRIDGE, fields))
    doc = {"subject": SUBJECT, "bridge": BRIDGE.hex(), "seqno": 12345, "stamp": STAMP, "data": PAYLOAD.hex()}
    text = json.dumps(doc)
    targets = {"encode": 250_000, "decode": 200_000, "fast_path": 1_000_000}
    ours = {
        "encode": rate(lambda: encode_frame(MsgType.MCAST, SUBJECT, BRIDGE, fields), N),
        "decode": rate(lambda: decode_frame(frame), N),
        "fast_path": rate(lambda: peek(frame), N),
    }
    peer = {"encode": rate(lambda: json.dumps(doc), N), "decode": rate(lambda: json.loads(text), N)}
    peer["fast_path"] = peer["decode"]
    rows: list[dict[str, object]] = [
        {
            "op": op, "frames_per_s": ours[op], "target": targets[op],
            "meets_target": ours[op] >= targets[op], "json_peer_per_s": peer[op],
            "ratio_vs_json": round(ours[op] / peer[op], 2),
        }
        for op in ours
    ]
    print(f"frame of {len(frame)} bytes; json peer document of {len(text)} bytes")
    report("wire", rows)


if __name__ == "__main__":
    main()
