"""The console's show commands against a converged simulated network: the manual's
4-node graph (tcp_link_ab A B : 200, bc 100, ac 200, bd 200, dc 300), each command's
rows checked against the nodes' real state."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest

import raims_node.router.links as links_module
from raims_node.config.gen_key import new_network_config
from raims_node.config.tree import from_dict
from raims_node.console import ConsoleContext, Names, execute, render_json, render_text, tport_label
from raims_node.linkstate import graph_from_db, parse_graph
from raims_node.nstats import NodeStats
from raims_node.router.actions import Deliver, Send
from raims_node.router.node import NS, Node
from raims_node.router.sim import SimNetwork
from raims_node.router.uids import UidTable
from raims_node.wire.subjects import bridge_b64
from tests.sim.conftest import creds_factory
from tests.sim.test_sim_basic import MANUAL_GRAPH as GRAPH
from tests.sim.test_sim_basic import build

LOST = 3  # messages of A that D never sees


def _publish_frames(node: Node, subject: str, n: int, now: int) -> list[bytes]:
    """n messages of `node` on `subject`, as the frames it sends (the network never
    carries them: the test hands them to a receiver itself)."""
    frames = []
    for i in range(n):
        sends = [a.data for a in node.publish(subject, b"%d" % i, now) if isinstance(a, Send)]
        assert sends, f"{subject} has no subscriber reachable from {node.user}"
        frames.append(sends[0])
    return frames


@pytest.fixture(scope="module")
def net() -> SimNetwork:
    net = build(creds_factory(), seed=5)
    net.subscribe("A", "RSF.IBM.N")
    net.psubscribe("A", "RSF.>", "rv")
    net.subscribe("D", "LOSS.X")
    net.subscribe("B", "NOSUB.Y")
    net.run_until(lambda: net.interest_known("D", "LOSS.X") and net.interest_known("A", "RSF.IBM.N")
                  and net.interest_known("B", "NOSUB.Y"))
    net.run_for(3 * NS)  # heartbeats carry the new sums
    # inject at D, on its link from B, what A publishes: a gap, a repeat, an unwanted subject
    a, d = net.nodes["A"].node, net.nodes["D"].node
    frames = _publish_frames(a, "LOSS.X", 2 + LOST, net.now)
    conn = net.links["link_bd"].conn_b
    d.on_frame(conn, frames[0], net.now)
    delivered = [x for x in d.on_frame(conn, frames[-1], net.now) if isinstance(x, Deliver)]
    assert [x.loss for x in delivered] == [LOST]
    assert not [x for x in d.on_frame(conn, frames[-1], net.now) if isinstance(x, Deliver)]
    d.on_frame(conn, _publish_frames(a, "NOSUB.Y", 1, net.now)[0], net.now)
    return net


def ctx(net: SimNetwork, name: str, **kw: object) -> ConsoleContext:
    return ConsoleContext(net.nodes[name].node, **kw)  # type: ignore[arg-type]


def rows(net: SimNetwork, name: str, line: str, **kw: object) -> list[dict[str, object]]:
    res = execute(ctx(net, name, **kw), line)
    assert res.error is None, res.error
    assert all(list(r) == res.columns for r in res.rows) or res.plain
    return res.rows


def label(net: SimNetwork, at: str, user: str) -> str:
    return Names(net.nodes[at].node).user(net.nodes[user].node.bridge)


def tport(net: SimNetwork, at: str, link: str) -> str:
    t = next(t for t in net.nodes[at].node.tports if t.name == link)
    return tport_label(t.name, t.tport_id)


def test_user_labels_number_peers_and_star_this_node(net: SimNetwork) -> None:
    names = Names(net.nodes["A"].node)
    labels = [names.user(b) for b in names.users()]
    assert labels[0] == "A.*"
    assert sorted(lbl.split(".")[0] for lbl in labels[1:]) == ["B", "C", "D"]
    assert sorted(lbl.split(".")[1] for lbl in labels[1:]) == ["1", "2", "3"]


@pytest.mark.parametrize("at", "ABCD")
def test_adjacency_lists_each_link_on_both_ends(net: SimNetwork, at: str) -> None:
    got = {(r["user"], r["adj"], r["tport"], r["type"], r["cost"]) for r in rows(net, at, "show adjacency")}
    want = set()
    for link, a, b, cost in GRAPH:
        for x, y in ((a, b), (b, a)):
            want.add((label(net, at, x), label(net, at, y), tport(net, x, link), "tcp", cost))
    assert got == want
    assert len(rows(net, at, "adj")) == 2 * len(GRAPH)


def test_routes_reach_d_through_b_at_cost_400(net: SimNetwork) -> None:
    got = [r for r in rows(net, "A", "show routes") if r["user"] == label(net, "A", "D")]
    assert got[0]["tport"] == tport(net, "A", "link_ab")
    assert got[0]["cost"] == 400
    assert got[0]["path"] == [0, 1, 2, 3]
    assert got[0]["state"] == ["inbox"]  # not a direct link: no heartbeat
    # the other link of A reaches D without coming back through A: A-C-D
    assert [(r["tport"], r["cost"], r["path"]) for r in got[1:]] == [(tport(net, "A", "link_ac"), 500, [])]
    b = [r for r in rows(net, "A", "routes 3") if r["user"] == label(net, "A", "B")]
    assert (b[0]["tport"], b[0]["cost"], b[0]["state"]) == (tport(net, "A", "link_ab"), 200, ["inbox", "hb"])
    assert [(r["tport"], r["cost"]) for r in b[1:]] == [(tport(net, "A", "link_ac"), 300)]  # A-C-B
    text = render_text(execute(ctx(net, "A"), "routes"))
    assert f"| {tport(net, 'A', 'link_ab')} | inbox,hb |  200 | 0,1,2,3 |" in text


def test_routes_fill_fd_and_route_from_the_daemons_port_rows(net: SimNetwork) -> None:
    ab = tport(net, "A", "link_ab")
    ports = [{"tport": ab, "fd": 9, "address": "B@tcp://10.0.0.2:9000"}]
    got = [r for r in rows(net, "A", "routes", ports=lambda: ports) if r["tport"] == ab]
    assert {(r["fd"], r["route"]) for r in got} == {(9, "B@tcp://10.0.0.2:9000")}


def test_path_gives_first_hop_and_total_cost(net: SimNetwork) -> None:
    got = {r["dest"]: (r["tport"], r["cost"], r["path_cost"]) for r in rows(net, "A", "show path 2")}
    ab, ac = tport(net, "A", "link_ab"), tport(net, "A", "link_ac")
    assert got == {label(net, "A", "B"): (ab, 200, 200), label(net, "A", "C"): (ac, 200, 200),
                   label(net, "A", "D"): (ab, 200, 400)}


def test_tree_from_this_node_and_from_another(net: SimNetwork) -> None:
    got = {r["dest"]: (r["source"], r["cost"]) for r in rows(net, "A", "show tree")}
    assert got == {"B": ("A.*", 200), "C": ("A.*", 200), "D": (label(net, "A", "B"), 400)}
    first = [r for r in rows(net, "A", "tree") if r["cost"] == 200]
    assert sorted(r["set"] for r in first) == [0, 1]
    got = {r["dest"]: (r["source"], r["cost"]) for r in rows(net, "A", "tree D")}
    d, b = label(net, "A", "D"), label(net, "A", "B")
    assert got == {"B": (d, 200), "C": (d, 300), "A": (b, 400)}


def test_forward_lists_the_links_each_source_is_forwarded_on(net: SimNetwork) -> None:
    def table(at: str) -> dict[object, set[object]]:
        out: dict[object, set[object]] = {}
        for r in rows(net, at, "show forward"):
            out.setdefault(r["source"], set())
            if r["tport"] is not None:
                out[r["source"]].add(r["tport"])
        return out

    a = table("A")
    assert a == {"A.*": {tport(net, "A", "link_ab"), tport(net, "A", "link_ac")},
                 label(net, "A", "B"): set(), label(net, "A", "C"): set(), label(net, "A", "D"): set()}
    b = table("B")  # T(A) = A-B, A-C, B-D; T(D) = D-B, D-C, B-A
    assert b[label(net, "B", "A")] == {tport(net, "B", "link_bd")}
    assert b[label(net, "B", "D")] == {tport(net, "B", "link_ab")}


def test_graph_is_the_database_graph_and_parses_back(net: SimNetwork) -> None:
    node = net.nodes["C"].node
    lines = [r["graph"] for r in rows(net, "C", "show graph")]
    assert lines == graph_from_db(node.db, node.bridge).text().splitlines()
    graph = parse_graph("\n".join(lines))
    assert graph.start == "C"
    assert {(gl.name, frozenset(gl.nodes), gl.cost[0]) for gl in graph.links} == {
        (link, frozenset((a, b)), cost) for link, a, b, cost in GRAPH}


def test_peers_rows_follow_the_node(net: SimNetwork) -> None:
    a = net.nodes["A"].node
    got = rows(net, "A", "show peers")
    assert got[0]["user"] == "A.*"
    assert (got[0]["bridge"], got[0]["link"], got[0]["seq"]) == (bridge_b64(a.bridge), a.link_seqno, a.sub_seqno)
    assert got[0]["sub"] == a.bloom.count == 2
    by_user = {r["user"]: r for r in got[1:]}
    d = net.nodes["D"].node
    row = by_user[label(net, "A", "D")]
    rec = a.db.peer(d.bridge)
    assert rec is not None
    assert (row["bridge"], row["link"], row["time"]) == (bridge_b64(d.bridge), rec.link_seqno, d.start_ns)
    assert (row["tport"], row["cost"], row["sub"]) == (tport(net, "A", "link_ab"), 400, 1)
    assert row["lat"] == (a.peers[d.bridge].latency_ns or None)  # the last ping's, none before one
    assert rows(net, "A", "pe zombie") == []
    assert [r["bridge"] for r in rows(net, "A", "show peers nonce")] == sorted(str(r["bridge"]) for r in got)
    by_start = [r["time"] for r in rows(net, "A", "show peers start")]
    assert by_start == sorted(r["time"] for r in got)  # type: ignore[type-var]
    assert "takes zombie" in str(execute(ctx(net, "A"), "peers bogus").error)
    hosts = {r["user"]: r["bridge"] for r in rows(net, "A", "show peers host")}  # the manual's host id
    ips = {r["user"]: r["bridge"] for r in rows(net, "A", "show peers ip")}  # its dotted quad
    assert hosts[label(net, "A", "D")] == d.bridge[:4].hex() and ips["A.*"] == ".".join(map(str, a.bridge[:4]))


def _chain_abc() -> SimNetwork:
    """A - B - C, converged."""
    net = SimNetwork(creds_factory(), seed=9)
    for name in "ABC":
        net.add_node(name)
    net.add_link("ab", "A", "B")
    net.add_link("bc", "B", "C")
    net.run_until(net.converged, timeout_ns=10 * NS)
    return net


def test_zombies_are_the_peers_removed() -> None:
    net = _chain_abc()
    c = net.nodes["C"].node
    net.bye("C")
    net.run_until(lambda: c.bridge not in net.nodes["A"].node.peers, timeout_ns=5 * NS)
    got = rows(net, "A", "show peers zombie")
    assert [(r["bridge"], r["link"], r["cost"]) for r in got] == [(bridge_b64(c.bridge), None, None)]
    assert str(got[0]["user"]).startswith("C.")
    assert [r["user"] for r in rows(net, "A", "peers")][1:] == [label(net, "A", "B")]


def test_a_uid_stays_with_its_peer_through_death_and_a_new_instance() -> None:
    net = _chain_abc()
    a = net.nodes["A"].node
    before = {r["bridge"]: r["user"] for r in rows(net, "A", "peers")}
    old_c = net.nodes["C"].node.bridge
    net.bye("C")
    net.run_until(lambda: old_c not in a.peers, timeout_ns=5 * NS)
    new_c = net.restart("C").bridge
    net.run_until(lambda: new_c in a.peers and net.converged(), timeout_ns=10 * NS)
    live = {r["bridge"]: r["user"] for r in rows(net, "A", "peers")}
    zombies = {r["bridge"]: r["user"] for r in rows(net, "A", "peers zombie")}
    b64 = bridge_b64
    assert zombies == {b64(old_c): before[b64(old_c)]}  # the dead instance keeps its label
    assert live[b64(net.nodes["B"].node.bridge)] == before[b64(net.nodes["B"].node.bridge)]
    assert live[b64(new_c)].startswith("C.") and live[b64(new_c)] not in before.values()  # a uid of its own
    assert {r["user"] for r in rows(net, "A", f"show inbox {live[b64(new_c)]}")} == {live[b64(new_c)]}  # typed back
    subject = "_N.PEER.A." + live[b64(new_c)].rpartition(".")[2]  # the statistics name the same uid
    net.subscribe("A", subject)
    assert [json.loads(p)["peer"] for s, p in NodeStats(a).build(net.now, []) if s == subject] == ["C"]


def test_the_node_keeps_a_bounded_number_of_zombies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(links_module, "ZOMBIES_KEPT", 1)
    net = _chain_abc()
    a = net.nodes["A"].node
    first_uid = a.state.uids.get(net.nodes["C"].node.bridge)
    for _ in range(2):  # two instances of C die
        gone = net.nodes["C"].node.bridge
        net.bye("C")
        net.run_until(lambda: gone not in a.peers, timeout_ns=5 * NS)  # noqa: B023
        fresh = net.restart("C").bridge
        net.run_until(lambda: fresh in a.peers and net.converged(), timeout_ns=10 * NS)  # noqa: B023
    assert list(a.zombies) == [gone]  # only the last one is kept
    assert a.state.uids.get(fresh) == first_uid  # the first C's uid was free again
    assert len(a.state.uids) == len(a.peers) + len(a.zombies)


def test_the_oldest_zombies_are_forgotten_and_their_uids_taken_again() -> None:
    table = UidTable()
    assert [table.assign(bytes([i]) * 16) for i in range(3)] == [1, 2, 3]
    assert table.assign(bytes([1]) * 16) == 2  # kept
    table.release(bytes([0]) * 16)
    table.release(bytes([1]) * 16)
    assert table.assign(b"n" * 16) == 1 and table.assign(b"m" * 16) == 2 and table.assign(b"o" * 16) == 4
    assert len(table) == 4


def test_loss_counts_what_was_injected(net: SimNetwork) -> None:
    got = {r["user"]: r for r in rows(net, "D", "show loss")}
    a = got[label(net, "D", "A")]
    now = net.now
    assert (a["msg_loss"], a["loss_time"]) == (LOST, now)
    assert (a["repeat"], a["rep_time"]) == (1, now)
    assert (a["not_sub"], a["not_time"]) == (1, now)
    assert (a["ibx_loss"], a["ibx_time"]) == (0, None)
    for user in "BC":
        r = got[label(net, "D", user)]
        assert (r["repeat"], r["not_sub"], r["msg_loss"], r["ibx_loss"]) == (0, 0, 0, 0)


def test_seqno_shows_both_windows(net: SimNetwork) -> None:
    sent = {r["subject"]: r for r in rows(net, "A", "show seqno")}
    assert sent["LOSS.X"]["source"] == "ipc"
    assert sent["LOSS.X"]["seqno"] == 2 + LOST
    got = rows(net, "D", "seqno LOSS")
    assert [(r["source"], r["subject"], r["seqno"]) for r in got] == [(label(net, "D", "A"), "LOSS.X", 2 + LOST)]
    assert got[0]["start"] <= net.now  # type: ignore[operator]


def test_subs_local_rows_and_what_is_known_of_others(net: SimNetwork) -> None:
    got = rows(net, "A", "show subs")
    mine = {(r["subject"], r["type"], r["count"]) for r in got if r["user"] == "A.*"}
    assert mine == {("RSF.IBM.N", "sub", 1), ("RSF.>", "rv", 1)}
    others = {(r["user"], r["subject"], r["type"], r["count"]) for r in got if r["user"] != "A.*"}
    assert others == {(label(net, "A", "D"), "LOSS.X", "sub", None), (label(net, "A", "B"), "NOSUB.Y", "sub", None)}
    assert [(r["user"], r["subject"]) for r in rows(net, "A", "subs * IBM")] == [("A.*", "RSF.IBM.N")]
    assert [(r["subject"], r["type"]) for r in rows(net, "D", "subs A RSF.>")] == [("RSF.>", "rv")]
    assert [r["subject"] for r in rows(net, "A", "subs D")] == ["LOSS.X"]


def test_blooms_group_the_peers_behind_each_link(net: SimNetwork) -> None:
    a = net.nodes["A"].node
    got = {r["tport"]: r for r in rows(net, "A", "show blooms")}
    ab = got[tport(net, "A", "link_ab")]
    assert sorted(ab["bloom"]) == ["B", "D"]  # type: ignore[arg-type]
    assert got[tport(net, "A", "link_ac")]["bloom"] == ["C"]
    blooms = [a.peers[net.nodes[n].node.bridge].bloom for n in "BD"]
    assert ab["total"] == sum(f.count for f in blooms) == 2  # type: ignore[attr-defined]
    local = got[None]
    assert (local["dest"], local["subs"], local["total"]) == ("ipc", 1, 2)
    assert base64.b64decode(str(local["filter"])) == a.bloom.to_bytes()  # for the Spark audit
    assert (local["size_bits"], local["seed"]) == (a.bloom.size_bits, a.bloom.seed)
    assert str(local["filter"]) not in render_text(execute(ctx(net, "A"), "show blooms"))


def test_match_names_the_peers_whose_bloom_passes(net: SimNetwork) -> None:
    assert [r["user"] for r in rows(net, "C", "show match LOSS.X")] == [label(net, "C", "D")]
    assert [r["user"] for r in rows(net, "C", "show match RSF.ANY.O")] == [label(net, "C", "A")]


def test_counters_sync_inbox_skew_follow_the_peers(net: SimNetwork) -> None:
    a = net.nodes["A"].node
    b, d = net.nodes["B"].node, net.nodes["D"].node
    counters = {r["user"]: r for r in rows(net, "A", "show counters")}
    assert counters["A.*"]["start"] == a.start_ns and counters["A.*"]["hb_seqno"] is None
    cb = counters[label(net, "A", "B")]
    pb = a.peers[b.bridge]
    assert pb.hb_seqno > 0
    assert (cb["hb_seqno"], cb["hb_time"], cb["snd_ibx"], cb["rcv_ibx"]) == (
        pb.hb_seqno, pb.hb_time_ns, pb.inbox_sent, pb.inbox_recv)
    cd = counters[label(net, "A", "D")]
    assert (cd["hb_seqno"], cd["hb_time"]) == (0, None)  # not a neighbour: no heartbeat

    sync = {r["user"]: r for r in rows(net, "A", "show sync")}
    sums = a.db.seqno_sums()
    assert (sync["A.*"]["link_seqno"], sync["A.*"]["link_sum"], sync["A.*"]["sub_sum"]) == (
        a.link_seqno, sums.link_sum, sums.sub_sum)
    sb = sync[label(net, "A", "B")]
    assert (sb["link_sum"], sb["sub_sum"]) == (b.db.seqno_sums().link_sum, b.db.seqno_sums().sub_sum)
    assert sync[label(net, "A", "D")]["link_sum"] is None
    assert sync[label(net, "A", "D")]["sub_seqno"] == d.sub_seqno
    mc = ("mc_req", "mc_res", "req_adj", "res_adj")  # no _M.sync in raims: counted 0, as the manual's quiet rows
    assert [sync["A.*"][c] for c in mc] == [None] * 4 and [sb[c] for c in mc] == [0] * 4

    inbox = rows(net, "A", "show inbox B")  # the last 32 each way, by seqno, with their types
    assert {r["user"] for r in inbox} == {label(net, "A", "B")} and len(inbox) <= 32
    sent = [(r["send_seqno"], r["send_type"]) for r in inbox if r["send_seqno"] is not None]
    recv = [(r["recv_seqno"], r["recv_type"]) for r in inbox if r["recv_seqno"] is not None]
    assert sent == sorted(sent) and recv == sorted(recv)
    assert (sent[-1][0], recv[-1][0]) == (pb.inbox_sent, pb.inbox_recv)
    assert "u_inbox_auth" in {t for _, t in sent} & {t for _, t in recv}
    assert all(str(t).startswith("u_inbox") for _, t in sent + recv)
    skew = {r["user"]: r for r in rows(net, "A", "show skew")}
    assert len(skew) == 3
    for name in "BCD":
        p = a.peers[net.nodes[name].node.bridge]
        r = skew[label(net, "A", name)]
        assert r["lat"] == (p.latency_ns or None)
        assert r["pong"] == (p.pong_skew_ns if p.pong_recv else None)
        assert r["ping"] == (p.ping_skew_ns if p.ping_recv else None)
        assert r["time"] == (p.skew_time_ns or None)
    near, far = skew[label(net, "A", "B")], skew[label(net, "A", "D")]
    assert near["ref"] == 0 and far["hb"] is None and far["ref"] is None  # hb: a neighbour's heartbeats
    assert near["hb"] is not None and abs(near["hb"]) < 10_000_000  # one clock in the simulator: no skew
    assert near["time"] is not None and near["time"] <= net.now


def test_pubtype_and_events_are_the_node_counters(net: SimNetwork) -> None:
    a = net.nodes["A"].node
    got = rows(net, "A", "show pubtype")
    expected = {t: (a.counters.pub_recv.get(t, 0), a.counters.pub_send.get(t, 0))
                for t in a.counters.pub_recv.keys() | a.counters.pub_send.keys()}
    expected["mcast_subject"] = (a.counters.mcast_recv, a.counters.published)
    assert {r["type"]: (r["recv_count"], r["send_count"]) for r in got} == expected
    assert a.counters.published > 0
    order = [r["type"] for r in got]
    assert order.index("u_peer_add") < order.index("u_adjacency") < order.index("mcast_subject")
    events = rows(net, "A", "show events")
    assert events == a.events.rows()
    assert "converge" in [e["event"] for e in events]


def test_ports_are_the_daemons_rows_filtered_by_transport(net: SimNetwork) -> None:
    ports = [{"tport": "mesh.1", "type": "mesh", "fd": 18, "fl": "LX"},
             {"tport": "mesh.2", "type": "mesh", "fd": 19, "bs": 3250008, "lat": 173_000},
             {"tport": "meshy.3", "type": "mesh", "fd": 20}]
    got = rows(net, "A", "show ports mesh", ports=lambda: ports)
    assert [(r["tport"], r["fd"], r["bs"], r["address"]) for r in got] == [
        ("mesh.1", 18, None, None), ("mesh.2", 19, 3250008, None)]
    assert len(rows(net, "A", "ports", ports=lambda: ports)) == 3
    assert "173us" in render_text(execute(ctx(net, "A", ports=lambda: ports), "ports mesh.2"))


def test_configuration_commands_read_the_loaded_tree(net: SimNetwork) -> None:
    data = new_network_config("test", ["A", "B", "Z"])
    data["transports"] = [{"tport": "link_ab", "type": "tcp", "route": {"connect": "hostb", "port": 9000}},
                          {"tport": "spare", "type": "tcp", "route": {"listen": "*", "port": 9001}},
                          {"tport": "lo", "type": "name", "route": {"port": 8400}},
                          {"tport": "idle", "type": "name", "route": {"port": 8401}},
                          {"tport": "tel", "type": "telnet", "route": {"port": 2222}}]
    data.setdefault("parameters", {}).update({"salt_data": "c2FsdA==", "pass_data": "cGFzcw==", "heartbeat": 5})
    tree = from_dict(data)
    text = [r["running"] for r in rows(net, "A", "show running", config=tree)]
    assert "  - tport: link_ab" in text or "- tport: link_ab" in text
    assert not [line for line in text if "pri:" in line]  # private keys stay out
    assert not [line for line in text if "_data" in line] and any("heartbeat" in line for line in text)  # their seal too
    assert rows(net, "A", "show running transports spare", config=tree) == rows(  # the manual's plural
        net, "A", "show running transport spare", config=tree)
    one = [r["running"] for r in rows(net, "A", "run t spare", config=tree)]
    assert one[0] == "transports:" and any("9001" in line for line in one) and not any("link_ab" in x for x in one)
    assert execute(ctx(net, "A", config=tree), "run t nosuch").error == "no tport 'nosuch' in the configuration"
    names = [{"tport": "lo", "type": "name", "fd": 1},  # the daemon's name service of device lo
             {"tport": "tel", "type": "telnet", "fd": ""},  # a telnet listener (server.py)
             {"tport": "link_ab.1", "type": "tcp"}, {"tport": "link_ac.2", "type": "tcp"}]  # its links
    tports = {r["tport"]: r for r in rows(net, "A", "show tport", config=tree, ports=lambda: names)}
    assert (tports["link_ab"]["state"], tports["link_ab"]["connect"]) == ("running", ["tcp://hostb:9000"])
    assert (tports["spare"]["state"], tports["spare"]["listen"]) == ("-", ["tcp://*:9001"])  # the manual's urls
    assert (tports["lo"]["state"], tports["idle"]["state"], tports["tel"]["state"]) == ("running", "-", "running")
    assert tports["link_ac"]["state"] == "running"  # running, not configured
    users = {r["user"]: r["uid"] for r in rows(net, "A", "show users", config=tree)}
    assert users == {"A": 0, "B": Names(net.nodes["A"].node).uid(net.nodes["B"].node.bridge), "Z": None}
    assert execute(ctx(net, "A"), "show running").error == "no configuration is loaded"


def test_errors_name_the_bad_argument(net: SimNetwork) -> None:
    c = ctx(net, "A")
    assert "'7'" in str(execute(c, "show routes 7").error)
    assert "no user 'Q'" in str(execute(c, "tree Q").error)
    assert execute(c, "pi").error == "ping is not available in this console"
    assert "ambiguous" in str(execute(c, "s").error)


SHOW_LINES = ["help", "peers", "adj", "routes", "path 1", "tree B", "forward 2", "graph", "subs", "seqno",
              "blooms", "ports", "events", "loss", "counters", "sync", "pubtype", "inbox", "skew", "tport",
              "users", "match RSF.X", "logs"]


@pytest.mark.parametrize("line", SHOW_LINES)
def test_json_is_the_rows_and_text_has_a_line_per_row(net: SimNetwork, line: str) -> None:
    logs: Callable[[], list[str]] = lambda: ["network converges 0.004 secs", "second line"]  # noqa: E731
    res = execute(ctx(net, "A", log_lines=logs), line)
    assert res.error is None
    assert json.loads(render_json(res)) == res.rows
    text = render_text(res).splitlines()
    rules = sum(1 for t in text[2:] if set(t) <= set("-+"))
    assert len(text) == len(res.rows) + (0 if res.plain else 2 + rules)


def test_cost_lists_each_transport_with_its_four_costs(net: SimNetwork) -> None:
    got = {r["tport"]: (r["cost"], r["cost4"]) for r in rows(net, "A", "show cost")}
    want = {tport(net, "A", link): (cost, cost) for link, a, b, cost in GRAPH if "A" in (a, b)}
    assert got == want


def test_reachable_names_the_users_behind_each_transport(net: SimNetwork) -> None:
    got = rows(net, "A", "show reachable")  # the manual's: user, path, fd, tport
    assert {r["user"] for r in got} == {label(net, "A", u) for u in "BCD"}
    assert all(str(r["tport"]).startswith("link_") for r in got)
    for u in "BCD":  # each of the four paths starts on exactly one transport
        paths = [int(p) for r in got if r["user"] == label(net, "A", u) for p in str(r["path"]).split(",")]
        assert sorted(paths) == [0, 1, 2, 3], u
    b = next(r for r in got if r["user"] == label(net, "A", "B"))
    assert b["tport"] == tport(net, "A", "link_ab")


def test_windows_count_the_subjects_in_each(net: SimNetwork) -> None:
    by = {r["tab"]: r for r in rows(net, "D", "show windows")}  # the manual's rows and columns
    d = net.nodes["D"].node
    assert {"sub", "sub_old", "pub", "pub_old", "bloom"} <= set(by)
    assert by["sub"]["count"] + by["sub_old"]["count"] == len(d.sub_window) and by["sub"]["count"] >= 1
    assert by["pub"]["win_size"] == d.params.pub_window_size and by["sub"]["win_size"] == d.params.sub_window_size
    assert 0 < by["sub"]["size"] <= by["sub"]["max_size"] and by["sub"]["rotate_time"] <= net.now
    assert by["bloom"]["count"] == 3 and by["bloom"]["size"] > 0  # A, B and C's filters


def test_urls_and_rpcs_and_the_rv_tables(net: SimNetwork) -> None:
    urls = rows(net, "B", "show urls")
    assert {r["user"] for r in urls} == {label(net, "B", u) for u in "ACD"}
    assert rows(net, "A", "show rpcs") == []  # converged: nothing outstanding
    assert rows(net, "A", "show hosts") == [] and rows(net, "A", "show rvsub") == []
    for cmd in ("show status", "show fds", "show buffers", "show cache", "show poll", "show startup"):
        assert execute(ctx(net, "A"), cmd).error is None
    net.publish("A", "cache.x", b"m")  # a subject published here: its decision is cached
    caches = {r["cache"]: r["entries"] for r in rows(net, "A", "show cache")}
    assert caches["published_subjects"] >= 1 and caches["next_hops"] >= 1, caches


def test_counters_show_the_daemons_flow_counters_on_the_nodes_own_row(net: SimNetwork) -> None:
    flow = {"buffered": 123, "slow_consumers": 2, "dropped_links": 0}
    counters = {r["user"]: r for r in rows(net, "A", "show counters", flow=lambda: flow)}
    assert {k: counters["A.*"][k] for k in flow} == flow
    assert counters[label(net, "A", "B")]["buffered"] is None


def test_message_commands_create_and_export_a_log_from_the_console(net: SimNetwork, tmp_path: Path) -> None:
    root = str(tmp_path / "message")
    res = execute(ctx(net, "A"), f"message.create {root} ring 1 7")
    assert res.error is None, res.error
    assert (tmp_path / "message" / "ring" / "1").exists() or any((tmp_path / "message").rglob("*"))
    bad = execute(ctx(net, "A"), f"message.create {root} ring x notanumber")
    assert bad.error is not None and "notanumber" in bad.error
    assert execute(ctx(net, "A"), "message.prune").error is not None  # too few words: a clear error


def test_configure_parameter_heartbeat_is_announced_as_sighup_does(net: SimNetwork) -> None:
    """The console's heartbeat change goes through Node.set_heartbeat: the interval the
    node announces changes with the one it keeps (setting only the latter made its
    neighbours time the link out every few seconds)."""
    from types import SimpleNamespace

    from raims_node.operator import OperatorHost

    node = net.nodes["A"].node
    daemon = SimpleNamespace(tree=from_dict(new_network_config("test", ["A", "B"])), node=node)
    OperatorHost(daemon, None).configure_parameter("heartbeat", "2")  # type: ignore[arg-type]
    assert (node.state.params.heartbeat_ns, node.state.hs.interval_s) == (2 * NS, 2)


def test_debug_takes_a_mask_or_the_manuals_flag_names() -> None:
    from raims_node.console.session import debug_mask

    assert debug_mask(["0x201"]) == debug_mask(["tcp", "hb"]) == 0x201
    assert debug_mask(["rv"]) == 0 and debug_mask(["0"]) == 0
    assert "got 'nosuch'" in str(debug_mask(["nosuch"]))
    assert debug_mask(["9" * 23]) == int("9" * 23) & 0x1FFFFF  # bits with no flag are dropped
    assert "0 or more" in str(debug_mask(["-1"]))


def test_debug_binds_a_list_of_flag_names() -> None:
    """`debug tcp hb` reaches debug_mask (it was refused: "debug takes I, got 2")."""
    from raims_node.console.commands import COMMANDS
    from raims_node.console.table import resolve

    cmd, args = resolve(COMMANDS, ["debug", "tcp", "hb"])
    assert cmd.name == "debug" and cmd.bind(args) == ["tcp hb"]


def test_debug_turns_on_the_loggers_of_its_bits_only() -> None:
    import logging

    from raims_node.console.session import debug_mask, set_debug

    try:
        set_debug(int(debug_mask(["tcp"])))
        assert logging.getLogger("raims.tcp").isEnabledFor(logging.DEBUG)
        assert logging.getLogger("raims.router").getEffectiveLevel() == logging.getLogger("raims").getEffectiveLevel()
        set_debug(int(debug_mask(["hb"])))
        assert logging.getLogger("raims.router").isEnabledFor(logging.DEBUG)
        assert logging.getLogger("raims.tcp").level == logging.NOTSET
    finally:
        set_debug(0)


def test_startup_is_the_configuration_files_and_running_adds_what_was_not_saved(net: SimNetwork,
                                                                               tmp_path: Path) -> None:
    import dataclasses

    import yaml

    from raims_node.config.records import TransportConfig
    from raims_node.config.tree import load

    data = new_network_config("test", ["A", "B"])
    data["transports"] = [{"tport": "saved", "type": "tcp", "route": {"listen": "*", "port": 9001}}]
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(data))
    started = load(tmp_path / "cfg.yaml")
    running = dataclasses.replace(started, transports=(*started.transports, TransportConfig("added", "tcp", {})))
    for line, want in (("show startup", {"saved"}), ("show running", {"saved", "added"})):
        text = "\n".join(str(r["startup" if "startup" in line else "running"]) for r in rows(net, "A", line, config=running))
        assert {t for t in ("saved", "added") if f"tport: {t}" in text} == want
    one = [r["startup"] for r in rows(net, "A", "show startup transports saved", config=running)]
    assert one[0] == "transports:" and any("9001" in str(x) for x in one)
    assert execute(ctx(net, "A", config=running), "show startup transport added").error == \
        "no tport 'added' in the configuration"


def test_cache_counts_the_forwarding_decisions_hits_and_misses(net: SimNetwork) -> None:
    def decisions() -> dict[str, object]:
        return next(r for r in rows(net, "A", "show cache") if r["cache"] == "forward_decisions")

    before = decisions()
    for i in range(5):
        net.publish("A", "cache.hits", f"m{i}".encode())  # the first decides, the next four hit
    after = decisions()
    assert isinstance(before["hit"], int) and isinstance(before["miss"], int)
    assert (after["miss"], after["hit"]) == (before["miss"] + 1, before["hit"] + 4)
    assert after["max_cnt"] >= after["entries"] >= 1 and after["max_size"] >= 1  # A's links the subject goes on
    assert after["hit_pct"] == round(after["hit"] * 100 / (after["hit"] + after["miss"]), 2)
    assert {r["cache"]: r["hit"] for r in rows(net, "A", "show cache")}["trees"] is None  # entries only


@pytest.mark.parametrize(("line", "header"), [
    ("show loss", "user | repeat | rep time | not sub | not time | msg loss | loss time | ibx loss | ibx time"),
    ("show counters", "user | start | hb seqno | hb time | snd ibx | rcv ibx | ping snd | ping stime | pong rcv "
                      "| ping rcv"),
    ("show inbox", "user | send seqno | send type | recv seqno | recv type"),
])
def test_headers_the_manual_spaces_are_spaced_in_the_text_only(net: SimNetwork, line: str, header: str) -> None:
    res = execute(ctx(net, "A"), line)
    text = render_text(res).splitlines()[0]
    assert " ".join(text.split()).startswith(header)  # the manual's header, columns padded alike
    assert [t.replace(" ", "_") for t in header.split(" | ")] == res.columns[:len(header.split(" | "))]  # the keys
