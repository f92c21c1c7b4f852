"""Batch frames across the manual's A-D network: a pipelined run published on A reaches D
in order, once, in fewer frames than messages, with singles interleaved (wire/batch.py)."""

from __future__ import annotations

from collections.abc import Callable

from raims_node.crypto.credentials import Credentials
from raims_node.router.actions import Send
from raims_node.router.node import NS
from raims_node.wire import peek
from tests.sim.test_sim_basic import build

SUBJECT = "RSF.IBM.N"


def _publish_run(net: object, name: str, payloads: list[bytes]) -> None:
    sim = net.nodes[name]  # type: ignore[attr-defined]
    net._apply(name, sim.node.publish_run(SUBJECT, payloads, net.now))  # type: ignore[attr-defined]


def test_runs_and_singles_arrive_in_order_once_in_batch_frames(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    net.subscribe("D", SUBJECT)
    net.run_until(lambda: net.interest_known("D", SUBJECT))
    sent: list[bytes] = []
    sends: list[Send] = []
    net.on_action = None
    orig = net._send

    def spy(who: str, act: Send) -> None:
        if who == "A" and peek(act.data).subject == SUBJECT.encode():
            sends.append(act)
        orig(who, act)

    net._send = spy  # type: ignore[method-assign]
    for i in range(3):
        run = [f"run{i}.{j}".encode() * (1 + j % 7) for j in range(3000)]  # several batch frames each
        _publish_run(net, "A", run)
        single = f"single{i}".encode()
        net.publish("A", SUBJECT, single)
        sent += [*run, single]
    net.run_for(NS // 10)
    got = [d.payload for d in net.nodes["D"].delivered]
    assert got == sent
    assert all(d.loss == 0 and d.subject == SUBJECT for d in net.nodes["D"].delivered)
    assert 6 < len(sends) < len(sent) // 100  # batches: a frame per ~16 KB, and the singles
    for s in net.nodes.values():
        for p in s.node.peers.values():
            assert (p.loss.repeat, p.loss.msg_loss) == (0, 0)
    # B forwarded the frames it got, it delivered none
    assert net.nodes["B"].delivered == [] and net.nodes["B"].node.counters.forwarded >= len(sends)


def test_a_replayed_batch_frame_is_a_repeat_and_not_delivered(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    net.subscribe("D", SUBJECT)
    net.run_until(lambda: net.interest_known("D", SUBJECT))
    frames: list[bytes] = []
    orig = net._send

    def spy(who: str, act: Send) -> None:
        if who == "B" and peek(act.data).subject == SUBJECT.encode():
            frames.append(act.data)
        orig(who, act)

    net._send = spy  # type: ignore[method-assign]
    _publish_run(net, "A", [b"one", b"two", b"three"])
    net.run_for(NS // 10)
    assert [d.payload for d in net.nodes["D"].delivered] == [b"one", b"two", b"three"] and len(frames) == 1
    d = net.nodes["D"].node
    conn = next(iter(d.state.conns))
    net._apply("D", d.on_frames(conn, frames, net.now))  # the same frame again
    assert len(net.nodes["D"].delivered) == 3
    assert sum(p.loss.repeat for p in d.peers.values()) == 3
