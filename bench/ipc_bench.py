"""Local pub/sub through one ms_server node: the sbus bus (type: ipc) against the NATS
bridge, measured in the same run on the same node.

100-byte payloads, one publisher and one subscriber, msgs/s from the first publish to the
last delivery, best of --repeat runs:
- sbus: raw SOCK_SEQPACKET clients in two processes (forked), one packet per message as
  the seed requires, the publisher handing the kernel 256 packets per sendmmsg(2) and
  the subscriber taking every pending packet per recvmmsg(2) (bridges/mmsg.py; plain
  send / recv_into where the platform lacks them): the syscall-batching analogue of the
  NATS client's pipelining;
- NATS: bridge_bench's raw pipelined clients (batches of 1000 PUB lines, a thread
  counting the delivered bytes).
- bare relay: the same sbus clients through a process that only moves packets from the
  publisher's socket to the subscriber's with recvmmsg / sendmmsg (no parsing, no
  routing): the floor one packet per message sets on this machine, for comparison;
- native floor: the same three roles in C (bench/sbusfloor.c, compiled on first use), the
  best any sbus server could reach here with native clients; `ceiling_ratio` = native
  floor / NATS is the highest sbus/NATS ratio one packet per message allows on this machine;
- NATS bridge with bridge_bench's native C clients (natsbench.c), at the same size.
The node's CPU time per message (user + system, /proc) is printed beside each rate: on
a shared machine it moves far less with the load than the rates do.
Target (issue 20): sbus >= 1.5x NATS.

    .venv/bin/python bench/ipc_bench.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import re
import select
import shutil
import socket
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import native  # noqa: E402
from bridge_bench import raw_rate  # noqa: E402

from raims_node.bridges import mmsg  # noqa: E402
from raims_node.config.test_adj import free_port  # noqa: E402
from tests.integration.harness import NodeProc, graph_config  # noqa: E402

PAYLOAD = bytes(range(100))
KEY = b"bench/x"
TARGET = 1.5
TIMEOUT_S = 60.0
BATCH = 256  # packets per sendmmsg / recvmmsg of the raw clients


def _connect(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(TIMEOUT_S)
    s.connect(path)
    return s


def _ping(s: socket.socket, token: bytes) -> None:
    s.send(b"CMSG raims/ping\x00" + token)
    while s.recv(1 << 16) != b"CMSG raims/ping\x00" + token:
        pass


def _subscriber(path: str, n: int, ready: Connection, out: Connection) -> None:
    s = _connect(path)
    s.send(b"SUB " + KEY)
    _ping(s, b"ready")
    ready.send(True)
    got, fd = 0, s.fileno()
    if mmsg.available():  # every pending packet per syscall (each packet one message)
        rx = mmsg.Receiver(BATCH, 4096)
        while got < n:
            try:
                got += len(rx.recv(fd))
            except BlockingIOError:
                if not select.select([fd], [], [], TIMEOUT_S)[0]:
                    return
    else:
        buf = bytearray(1 << 16)
        recv_into = s.recv_into
        for _ in range(n):
            recv_into(buf)
    out.send(time.perf_counter())  # the clock started at the publisher's first send
    s.close()


def _publisher(path: str, n: int, go: Connection, out: Connection) -> None:
    s = _connect(path)
    packet = b"MSG " + KEY + b"\x00" + PAYLOAD
    fd = s.fileno()
    go.recv()
    t0 = time.perf_counter()
    if mmsg.available():  # BATCH packets per syscall, each packet one message
        tx, batch, sent = mmsg.Sender(BATCH), [packet] * BATCH, 0
        while sent < n:
            k = tx.send(fd, batch if n - sent >= BATCH else batch[:n - sent])
            sent += k
            if k == 0 and not select.select([], [fd], [], TIMEOUT_S)[1]:
                break
    else:
        send = s.send
        for _ in range(n):
            send(packet)
    out.send(t0)
    s.close()


def _relay(path: str, n: int, ready: Connection) -> None:
    """A bare relay standing in for the server: accept a publisher and a subscriber, move
    each packet read from the first to the second with recvmmsg / sendmmsg, no routing.
    The floor of one packet per message through a middle process, for comparison."""
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    lsock.bind(path)
    lsock.listen(2)
    ready.send(True)
    sub, _ = lsock.accept()
    sub.recv(4096)  # its SUB
    sub.recv(4096)  # its ping, answered
    sub.send(b"CMSG raims/ping\x00ready")
    pub, _ = lsock.accept()
    rx, tx = mmsg.Receiver(64, 4096), mmsg.Sender(256)
    moved, pfd, sfd = 0, pub.fileno(), sub.fileno()
    while moved < n:
        try:
            sizes = rx.recv(pfd)
        except BlockingIOError:
            select.select([pfd], [], [], TIMEOUT_S)
            continue
        packets = [rx.mem[i * rx.slot:i * rx.slot + k] for i, k in enumerate(sizes) if k]
        if not packets:
            break
        done = 0
        while done < len(packets):
            k = tx.send(sfd, packets[done:])
            done += k
            if k == 0:
                select.select([], [sfd], [], TIMEOUT_S)
        moved += len(packets)
    sub.close()
    pub.close()
    lsock.close()


def relay_rate(tmp: Path, n: int) -> float:
    path = str(tmp / "relay.sock")
    ctx = mp.get_context("fork")
    ready_r, ready_w = ctx.Pipe(False)
    relay = ctx.Process(target=_relay, args=(path, n, ready_w))
    relay.start()
    try:
        if not ready_r.poll(TIMEOUT_S):
            raise RuntimeError("relay did not start")
        return sbus_rate(path, n)
    finally:
        relay.join(5)
        if relay.is_alive():
            relay.kill()
        with contextlib.suppress(OSError):
            os.unlink(path)


def sbus_rate(path: str, n: int) -> float:
    ctx = mp.get_context("fork")
    ready_r, ready_w = ctx.Pipe(False)
    go_r, go_w = ctx.Pipe(False)
    sub_r, sub_w = ctx.Pipe(False)
    pub_r, pub_w = ctx.Pipe(False)
    sub = ctx.Process(target=_subscriber, args=(path, n, ready_w, sub_w))
    pub = ctx.Process(target=_publisher, args=(path, n, go_r, pub_w))
    sub.start()
    try:
        if not ready_r.poll(TIMEOUT_S):
            raise RuntimeError("sbus subscriber did not start")
        ready_r.recv()
        pub.start()  # after the subscriber: the bare relay takes its first client as the subscriber
        go_w.send(True)
        if not sub_r.poll(TIMEOUT_S):
            raise RuntimeError(f"sbus subscriber got less than {n} messages")
        t1, t0 = sub_r.recv(), pub_r.recv()
        return n / (t1 - t0)
    finally:
        for p in (pub, sub):
            if p.pid is None:
                continue
            p.join(5)
            if p.is_alive():
                p.kill()


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used: a figure the machine's load
    changes far less than a rate."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_node(tmp: Path) -> tuple[NodeProc, str, int]:
    cfg, _ = graph_config(tmp, "node A\n", heartbeat="10 sec", web=False)
    data = yaml.safe_load(cfg.read_text())
    path, port = str(tmp / "bench.sock"), free_port()
    data["transports"] += [{"tport": "bus", "type": "ipc", "route": {"path": path}},
                           {"tport": "nats", "type": "nats", "route": {"port": port}}]
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    node = NodeProc("A", ["-d", str(cfg), "-u", "A", "-t", "bus.listen", "nats.listen"], tmp)
    node.wait_for(re.escape(f"listening on 127.0.0.1:{port}"))
    return node, path, port


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tenth of the messages, one run each")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (best kept)")
    args = ap.parse_args()
    n, repeat = (20_000, 1) if args.quick else (200_000, args.repeat)
    tmp = Path(tempfile.mkdtemp(prefix="raims-ipc-bench-"))
    node, path, port = start_node(tmp)
    try:
        sbus = nats = relay = floor = nats_native = 0.0
        floor_exe, nats_exe = native.build(native.SBUS_FLOOR_SOURCE), native.build()
        sbus_cpu, nats_cpu = float("inf"), float("inf")
        pid = node.proc.pid
        for _ in range(repeat):  # interleaved, so that load on the machine hits all alike
            c0 = _cpu_s(pid)
            sbus = max(sbus, sbus_rate(path, n))
            c1 = _cpu_s(pid)
            nats = max(nats, raw_rate("nats", port, port, n))
            c2 = _cpu_s(pid)
            sbus_cpu, nats_cpu = min(sbus_cpu, (c1 - c0) / n * 1e6), min(nats_cpu, (c2 - c1) / n * 1e6)
            if mmsg.available():
                relay = max(relay, relay_rate(tmp, n))
            if floor_exe is not None:
                floor = max(floor, native.sbus_floor(floor_exe, n * 5, len(PAYLOAD)))
            if nats_exe is not None:
                nats_native = max(nats_native, native.rate(nats_exe, port, port, n * 5, len(PAYLOAD)).rate)
    finally:
        node.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    ratio = sbus / nats
    rows = [("sbus (SOCK_SEQPACKET)", sbus, sbus_cpu), ("NATS bridge (pipelined)", nats, nats_cpu),
            ("bare relay (floor)", relay, None), ("native floor (C relay)", floor, None),
            ("NATS bridge, native C", nats_native, None)]
    print(f"{n} 100-byte messages through one node, best of {repeat}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
    print(f"{'client':<26}{'msgs/s':>12}{'node cpu us/msg':>18}")
    for name, rate, cpu in rows:
        print(f"{name:<26}{rate:>12,.0f}{'' if cpu is None else f'{cpu:.2f}':>18}")
    print(f"{'ratio sbus/NATS':<26}{ratio:>12.2f}   (target >= {TARGET}: {'met' if ratio >= TARGET else 'NOT met'})")
    if relay:
        print(f"{'sbus / bare relay':<26}{sbus / relay:>12.2f}   (the server's share of the one-packet-per-message floor)")
    ceiling = floor / nats if floor else 0.0
    if floor:
        print(f"{'ceiling: native floor/NATS':<26}{ceiling:>12.2f}   (the best sbus/NATS one packet per message allows here)")
    print(json.dumps({"bench": "ipc", "messages": n, "sbus_msgs_per_s": round(sbus), "nats_msgs_per_s": round(nats),
                      "ratio": round(ratio, 3), "target": TARGET, "meets": ratio >= TARGET,
                      "relay_msgs_per_s": round(relay), "sbus_node_cpu_us_per_msg": round(sbus_cpu, 2),
                      "nats_node_cpu_us_per_msg": round(nats_cpu, 2), "native_floor_msgs_per_s": round(floor),
                      "nats_native_msgs_per_s": round(nats_native), "ceiling_ratio": round(ceiling, 3)}))


if __name__ == "__main__":
    main()
