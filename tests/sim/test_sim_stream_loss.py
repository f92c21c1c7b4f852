"""Loss on a stable network (no link changes): frames of A's streams dropped on the way
to D (the simulator's `drop` hook), lost messages against D's loss counters (seqwin.py,
forward.first_lost). A gap that a later seqno reveals is counted once, on every path;
the frames before a stream's first one here are counted when the stream's time frame
began after the subscription and the last change of the links; a lost tail is counted
when the stream's next message comes, as the manual's counters do."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from raims_node.crypto.credentials import Credentials
from raims_node.router.actions import Send
from raims_node.router.sim import MS, Jitter, SimNetwork
from raims_node.wire import peek
from tests.sim.test_sim_basic import build
from tests.sim.test_sim_lone import LoneSim

US = MS // 1000
SUBJECTS = ("data.s0", "data.s1")
N = 60


def _net(creds: Callable[[str], Credentials], cls: type[SimNetwork], seed: int, old_sub: bool) -> SimNetwork:
    net = build(creds, seed=seed, cls=cls)
    net.jitter = Jitter(seed=seed)
    for s in SUBJECTS:
        net.subscribe("D", s)
    net.run_until(lambda: all(net.interest_known("D", s) for s in SUBJECTS))
    net.run_for(300 * MS)  # past the flux of the last link change (reorder.FLUX_NS): nothing waits
    if old_sub:  # the streams begin in a time frame (8.6 s) after the subscriptions
        net.run_for((((net.now >> 33) + 1) << 33) - net.now + 60 * MS)
    return net


def _drop(net: SimNetwork, which: Callable[[int], bool]) -> None:
    """Drop the frames of A's streams whose index in their stream `which` picks."""
    index: dict[bytes, int] = {}
    count = dict.fromkeys(SUBJECTS, 0)

    def drop(who: str, act: Send) -> bool:
        subject = peek(act.data).subject.decode()
        if who != "A" or subject not in count:
            return False
        if act.data not in index:
            index[act.data] = count[subject]
            count[subject] += 1
        return which(index[act.data])

    net.drop = drop


def _stream(net: SimNetwork, n: int = N) -> None:
    start = net.now
    for i in range(n):
        for j, s in enumerate(SUBJECTS):
            net.at(start + (i * len(SUBJECTS) + j) * 100 * US, lambda s=s, i=i: net.publish("A", s, b"%d" % i))
    net.run_for(n * len(SUBJECTS) * 100 * US + 50 * MS)


def _lost_counted(net: SimNetwork) -> tuple[int, int, int]:
    """(messages lost, D's msg_loss for A, loss notified to D's subscriptions)."""
    d = net.nodes["D"]
    got = {(x.subject, x.payload) for x in d.delivered if x.subject in SUBJECTS}
    loss = d.node.peers[net.nodes["A"].node.bridge].loss
    return N * len(SUBJECTS) - len(got), loss.msg_loss, sum(x.loss for x in d.delivered)


@pytest.mark.parametrize("cls", [SimNetwork, LoneSim])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_streams_first_frames_lost_on_a_stable_network_are_counted(
        creds: Callable[[str], Credentials], cls: type[SimNetwork], seed: int) -> None:
    """The first 1-3 frames of each stream dropped: D's first message has no stamp; the
    stream began after D subscribed and after the links last changed, so the messages
    before it were sent to D (none of them counted before)."""
    net = _net(creds, cls, seed, old_sub=True)
    _drop(net, lambda i: i < seed)
    _stream(net)
    assert _lost_counted(net) == (seed * len(SUBJECTS),) * 3


@pytest.mark.parametrize("cls", [SimNetwork, LoneSim])
def test_a_subscription_in_the_streams_time_frame_does_not_count_its_start(
        creds: Callable[[str], Credentials], cls: type[SimNetwork]) -> None:
    """Made in the frame the stream began in, the subscription may be younger than the
    stream (joined mid-stream, nothing lost): the seqno cannot tell, nothing is counted."""
    net = _net(creds, cls, 1, old_sub=False)
    if net.now >> 33 != (net.now + 100 * MS) >> 33:
        pytest.skip("a time frame starts in the run")
    _drop(net, lambda i: i < 2)
    _stream(net)
    assert _lost_counted(net) == (2 * len(SUBJECTS), 0, 0)


@pytest.mark.parametrize("cls", [SimNetwork, LoneSim])
def test_a_stream_joined_in_progress_counts_nothing(creds: Callable[[str], Credentials],
                                                     cls: type[SimNetwork]) -> None:
    """D subscribes to a stream A began before: its first message (no stamp) is where it
    joined, not loss, even once the subscription is older than a time frame."""
    net = build(creds, seed=4, cls=cls)
    _stream(net, 5)  # nobody subscribes yet
    net.run_for((((net.now >> 33) + 1) << 33) - net.now + 60 * MS)
    for s in SUBJECTS:
        net.subscribe("D", s)
    net.run_until(lambda: all(net.interest_known("D", s) for s in SUBJECTS))
    net.run_for(9000 * MS)  # older than the next time frame's start
    _stream(net, 5)
    d = net.nodes["D"]
    assert len(d.delivered) == 5 * len(SUBJECTS)
    assert d.node.peers[net.nodes["A"].node.bridge].loss.msg_loss == 0


@pytest.mark.parametrize("cls", [SimNetwork, LoneSim])
@pytest.mark.parametrize("seed", [5, 6])
def test_gaps_revealed_by_a_later_seqno_are_counted_once(creds: Callable[[str], Credentials],
                                                          cls: type[SimNetwork], seed: int) -> None:
    """Dropped frames inside the streams (not the first or the last): each counted once,
    whether the subscription is older than the stream's time frame or not."""
    for old_sub in (False, True):
        net = _net(creds, cls, seed, old_sub)
        _drop(net, lambda i: 0 < i < N - 1 and i % (seed + 2) == 1)
        _stream(net)
        lost, counted, notified = _lost_counted(net)
        assert lost > 0 and lost == counted == notified


def test_a_lost_tail_is_counted_when_the_next_message_comes(creds: Callable[[str], Credentials]) -> None:
    """Nothing on the wire tells a stream's last seqno before its next message: the
    last frames dropped count nothing until the stream goes on (the manual's counters)."""
    net = _net(creds, SimNetwork, 7, old_sub=False)
    _drop(net, lambda i: i >= N - 3)
    _stream(net)
    assert _lost_counted(net) == (3 * len(SUBJECTS), 0, 0)
    net.drop = None
    for s in SUBJECTS:
        net.publish("A", s, b"next")
    net.run_for(50 * MS)
    loss = net.nodes["D"].node.peers[net.nodes["A"].node.bridge].loss
    assert loss.msg_loss == 3 * len(SUBJECTS)


def test_a_runs_first_batch_frame_lost_is_counted(creds: Callable[[str], Credentials]) -> None:
    """The same for a pipelined run (batch frames, wire/batch.py): its first frame lost,
    the messages in it are counted when the next frame comes."""
    net = _net(creds, SimNetwork, 8, old_sub=True)
    _drop(net, lambda i: i == 0)
    run = [b"%d" % i for i in range(3000)]
    net._apply("A", net.nodes["A"].node.publish_run(SUBJECTS[0], run, net.now))
    net.run_for(50 * MS)
    d = net.nodes["D"]
    got = [x.payload for x in d.delivered]
    lost = len(run) - len(got)
    assert 0 < lost < len(run) and got == run[lost:]
    assert d.node.peers[net.nodes["A"].node.bridge].loss.msg_loss == lost == d.delivered[0].loss
