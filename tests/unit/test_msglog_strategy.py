"""The adaptive ring, hub/spoke/source/sink strategies, sans-IO (seed 004 section 1.6), and
the cabal configuration files (section 3.1.5)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from raims_node.msglog import config
from raims_node.msglog.config import Cabal, NodeType
from raims_node.msglog.errors import ConfigError
from raims_node.msglog.strategy import Connect, Direction, Drop, Link, Strategy, accepts

FLIP = {Direction.FEED: Direction.PULL, Direction.PULL: Direction.FEED}


def cabal_of(types: list[str]) -> Cabal:
    nodes = {}
    for i, t in enumerate(types, 1):
        raw: dict[str, object] = {"id": i if t in ("hub", "source") else 0, "type": t}
        if t in ("hub", "source"):
            raw["server"] = f"unix:///tmp/n{i}.s"
        if t == "hub":
            raw["client"] = f"unix:///tmp/n{i}.c"
        nodes[f"n{i}"] = raw
    return config.build("cab", list(nodes), nodes)


class Sim:
    """Every node's Strategy; connects succeed between up nodes in the same group."""

    def __init__(self, cabal: Cabal) -> None:
        self.cabal = cabal
        self.nodes = {n: Strategy(cabal, n, retry=1.0) for n in cabal.ring}
        self.up = set(cabal.ring)
        self.group: dict[str, int] = {}
        self.links: dict[int, tuple[str, str]] = {}  # id -> (requester, acceptor)
        self.ids = itertools.count(1)
        self.now = 0.0

    def reachable(self, a: str, b: str) -> bool:
        return a in self.up and b in self.up and self.group.get(a, 0) == self.group.get(b, 0)

    def kill(self, name: str) -> None:
        self.up.discard(name)
        for lid, (a, b) in list(self.links.items()):
            if name in (a, b):
                self._down(lid)
        self.nodes[name] = Strategy(self.cabal, name, retry=1.0)

    def _down(self, lid: int) -> None:
        a, b = self.links.pop(lid)
        self.nodes[a].link_down(lid, self.now)
        self.nodes[b].link_down(lid, self.now)

    def partition(self, groups: list[list[str]]) -> None:
        self.group = {n: i for i, g in enumerate(groups) for n in g}
        for name, s in self.nodes.items():
            s.set_blocked(
                n for n in self.cabal.ring if self.group.get(n, 0) != self.group.get(name, 0)
            )

    def run(self, seconds: float, step: float = 0.1) -> None:
        for _ in range(int(seconds / step)):
            self.now += step
            for name in sorted(self.up):
                for act in self.nodes[name].poll(self.now):
                    if isinstance(act, Drop):
                        if act.link in self.links:
                            self._down(act.link)
                        continue
                    peer = self.cabal.node(act.peer)
                    if (
                        self.reachable(name, act.peer)
                        and accepts(peer, self.cabal.node(name), FLIP[act.direction])
                        and name not in self.nodes[act.peer].blocked
                    ):
                        lid = next(self.ids)
                        self.links[lid] = (name, act.peer)
                        self.nodes[name].link_up(Link(lid, act.peer, act.direction, True))
                        self.nodes[act.peer].link_up(Link(lid, name, FLIP[act.direction], False))
                    else:
                        self.nodes[name].connect_failed(act.peer, act.direction, self.now)

    def feeds(self) -> set[tuple[str, str]]:
        """(server, client) of every link."""
        out = set()
        for lid, (a, _) in self.links.items():
            link = self.nodes[a].links[lid]
            out.add((a, link.peer) if link.direction is Direction.FEED else (link.peer, a))
        return out


def ring_edges(names: list[str]) -> set[tuple[str, str]]:
    return {(names[i], names[(i + 1) % len(names)]) for i in range(len(names))}


def test_five_hubs_form_a_ring_bypass_a_dead_one_and_reform() -> None:
    sim = Sim(cabal_of(["hub"] * 5))
    sim.run(3)
    assert sim.feeds() == ring_edges(["n1", "n2", "n3", "n4", "n5"])
    assert len(sim.links) == 5  # one link per edge, duplicates resolved
    sim.kill("n3")
    sim.run(3)
    assert sim.feeds() == ring_edges(["n1", "n2", "n4", "n5"])
    sim.up.add("n3")
    sim.run(4)
    assert sim.feeds() == ring_edges(["n1", "n2", "n3", "n4", "n5"])
    assert len(sim.links) == 5  # the bypass n2 -> n4 was dropped


def test_ten_hubs_split_into_two_rings_and_heal_into_one() -> None:
    names = [f"n{i}" for i in range(1, 11)]
    sim = Sim(cabal_of(["hub"] * 10))
    sim.run(3)
    assert sim.feeds() == ring_edges(names)
    sim.partition([names[:5], names[5:]])
    sim.run(4)
    assert sim.feeds() == ring_edges(names[:5]) | ring_edges(names[5:])
    sim.partition([names])
    sim.run(4)
    assert sim.feeds() == ring_edges(names) and len(sim.links) == 10


def test_spokes_tap_the_hub_behind_and_sinks_pull_every_source() -> None:
    sim = Sim(cabal_of(["hub", "spoke", "hub", "spoke"]))
    sim.run(3)
    assert sim.feeds() == {("n1", "n3"), ("n3", "n1"), ("n1", "n2"), ("n3", "n4")}
    sim.kill("n1")
    sim.run(3)
    assert ("n3", "n2") in sim.feeds()
    sim2 = Sim(cabal_of(["source", "sink", "source", "sink"]))
    sim2.run(2)
    assert sim2.feeds() == {("n1", "n2"), ("n3", "n2"), ("n1", "n4"), ("n3", "n4")}


def test_strategy_tries_candidates_in_order_then_waits() -> None:
    s = Strategy(cabal_of(["hub"] * 4), "n1", retry=1.0)
    acts = s.poll(0.0)
    assert Connect("n2", Direction.FEED) in acts and Connect("n4", Direction.PULL) in acts
    s.connect_failed("n2", Direction.FEED, 0.0)
    assert Connect("n3", Direction.FEED) in s.poll(0.0)
    s.connect_failed("n3", Direction.FEED, 0.0)
    assert Connect("n4", Direction.FEED) in s.poll(0.0)
    s.connect_failed("n4", Direction.FEED, 0.0)
    assert not [a for a in s.poll(0.5) if isinstance(a, Connect) and a.direction is Direction.FEED]
    assert Connect("n2", Direction.FEED) in s.poll(1.0)


NB = """
define ring cell "a,b,c";   # the ring
define a node;
a. define id      cell 1;
a. define type    cell "hub";
a. define client  cell "unix:///tmp/a.c";
a. define server  cell "tcp://127.0.0.1:7001";
define b node;
b. define id cell 0; b. define type cell "spoke";
define c node;
c. define id cell 3;
c. define type cell "hub";
c. define client cell "unix:///tmp/c.c";
c. define server cell "unix:///tmp/c.s";
"""


def test_cabal_nb_file_is_read_as_the_seed_writes_it(tmp_path: Path) -> None:
    p = tmp_path / "cabal.nb"
    p.write_text(NB)
    cab = config.load("cab", p)
    assert cab.ring == ("a", "b", "c")
    assert cab.node("a").server == config.Address("tcp", host="127.0.0.1", port=7001)
    assert cab.node("b").type is NodeType.SPOKE and cab.node("c").number == 3
    assert config.parse_nb("cab", config.to_nb(cab)) == cab
    y = tmp_path / "cabal.yaml"
    y.write_text("ring: [a]\nnodes: {a: {id: 1, type: source, server: 'unix:///x'}}\n")
    assert config.load("cab", y).node("a").type is NodeType.SOURCE


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('define ring cell "a";', "undefined"),
        ('define ring cell "a"; define a node; a. define type cell "hub";', "server address"),
        ('define ring cell "a"; define a node; a. define type cell "star";', "star"),
        (
            'define ring cell "a"; define a node; a. define id cell 1; a. define type cell "source";'
            ' a. define server cell "tls://h:1";',
            "tls",
        ),
        (
            'define ring cell "a,b"; define a node; define b node; a. define id cell 1;'
            ' a. define type cell "source"; a. define server cell "unix:///a";'
            ' b. define id cell 1; b. define type cell "source"; b. define server cell "unix:///b";',
            "share number",
        ),
        ("a. define id cell 1;", "before"),
    ],
)
def test_bad_cabal_configs_are_clear_errors(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        config.parse_nb("cab", text)


@pytest.mark.parametrize("seed", range(12))
def test_any_mix_of_dead_and_partitioned_hubs_settles_into_one_ring_per_group(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"n{i}" for i in range(1, 8)]
    sim = Sim(cabal_of(["hub"] * 7))
    sim.run(2)
    for _ in range(3):  # a few upheavals in a row, each settling before the next
        for n in names:
            if n in sim.up and rng.random() < 0.3:
                sim.kill(n)
            elif n not in sim.up and rng.random() < 0.6:
                sim.up.add(n)
        cut = rng.randrange(1, 7)
        groups = [names[:cut], names[cut:]] if rng.random() < 0.5 else [names]
        sim.partition(groups)
        sim.run(6)
        want: set[tuple[str, str]] = set()
        for g in groups:
            alive = [n for n in g if n in sim.up]
            if len(alive) > 1:
                want |= ring_edges(alive)
        assert sim.feeds() == want, (seed, groups, sorted(sim.up))
        assert len(sim.links) == len(want)
