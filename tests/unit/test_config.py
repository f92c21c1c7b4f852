"""Config tree and parameters: sections, units, includes, hosts, dir == file, errors, save."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node import RaimsError
from raims_node.config import params, tree
from raims_node.config.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


# ---------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5 secs", 5.0), ("10 sec", 10.0), ("10secs", 10.0), ("1 s", 1.0), ("250ms", 0.25),
        ("250 ms", 0.25), ("100 us", 1e-4), ("5 ns", 5e-9), ("1.5 min", 90.0), ("2 mins", 120.0),
        ("1 hour", 3600.0), ("2 hrs", 7200.0), ("1 day", 86400.0), ("60 SEC", 60.0), (7, 7.0),
        ("3", 3.0), (0.5, 0.5),
    ],
)
def test_time_units(text: object, seconds: float) -> None:
    assert params.parse_time(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4 MB", 4 << 20), ("10 mb", 10 << 20), ("1 MB", 1 << 20), ("8MB", 8 << 20), ("512 kb", 512 << 10),
        ("2k", 2048), ("1 gb", 1 << 30), ("100 b", 100), (4096, 4096), ("1 MiB", 1 << 20), ("1.5 kb", 1536),
    ],
)
def test_byte_units(text: object, size: int) -> None:
    assert params.parse_bytes(text) == size


@pytest.mark.parametrize(("text", "value"), [
    (True, True), (False, False), ("true", True), ("FALSE", False), ("yes", True), ("no", False),
    ("on", True), ("off", False), ("1", True), ("0", False), (1, True), (0, False),
])
def test_booleans(text: object, value: bool) -> None:
    assert params.parse_bool(text) is value


@pytest.mark.parametrize("bad", ["abc", "5 parsecs", "-3 secs", "", [1], True, "ten secs"])
def test_bad_times_raise_with_value(bad: object) -> None:
    with pytest.raises(ConfigError) as info:
        params.parse_time(bad)
    assert repr(bad)[:3] in str(info.value) or "unit" in str(info.value)


@pytest.mark.parametrize("bad", ["lots", "4 XB", "-1 mb", None])
def test_bad_sizes_raise(bad: object) -> None:
    with pytest.raises(ConfigError):
        params.parse_bytes(bad)


@pytest.mark.parametrize("bad", ["maybe", 2, "2", None])
def test_bad_booleans_raise(bad: object) -> None:
    with pytest.raises(ConfigError, match="boolean"):
        params.parse_bool(bad)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["ms", "sec", "secs", "min", "hours"]))
def test_time_unit_scaling(n: int, unit: str) -> None:
    scale = {"ms": 1e-3, "sec": 1.0, "secs": 1.0, "min": 60.0, "hours": 3600.0}[unit]
    assert params.parse_time(f"{n} {unit}") == pytest.approx(n * scale)
    assert params.parse_time(f"{n}{unit.upper()}") == pytest.approx(n * scale)


def test_defaults_table_matches_manual() -> None:
    p = params.Parameters()
    assert p.size("pub_window_size") == 4 << 20
    assert p.size("sub_window_size") == 8 << 20
    assert p.time("pub_window_time") == 10.0
    assert p.time("sub_window_time") == 10.0
    assert p.heartbeat == 10.0
    assert p.reliability == 15.0
    assert p.text("timestamp") == "LOCAL"
    assert p.tcp_timeout == 10.0
    assert p.flag("tcp_ipv4only") is False
    assert p.flag("tcp_ipv6only") is False
    assert p.tcp_noencrypt is False
    assert p.time("tcp_write_timeout") == 10.0
    assert p.size("tcp_write_highwater") == 1 << 20
    assert p.count("idle_busy") == 16
    for name in ("salt", "pass", "salt_data", "pass_data", "pid_file", "map_file", "db_num", "ipc_name",
                 "working_directory"):
        assert p.text(name) is None
    assert len(params.MANUAL_PARAMETERS) == 25
    assert p.time("tcp_auth_timeout") == 10.0  # issue 18's, after the manual's
    assert (p.count("tcp_pending_max"), p.count("tcp_pending_per_host")) == (1024, 64)
    with pytest.raises(ConfigError, match="no default"):
        p.time("no_such_param")


def test_parameters_override_defaults_and_reject_bad_values() -> None:
    p = params.Parameters({"heartbeat": "5 secs", "idle_busy": 3, "timestamp": "gmt", "my_own": "x"})
    assert p.heartbeat == 5.0
    assert p.count("idle_busy") == 3
    assert p["my_own"] == "x"
    with pytest.raises(ConfigError, match="heartbeat"):
        params.Parameters({"heartbeat": "soon"})
    with pytest.raises(ConfigError, match="LOCAL, GMT"):
        params.Parameters({"timestamp": "UTC+2"})



@pytest.mark.parametrize(("name", "value", "reason"), [
    ("heartbeat", "2 hours", r"more than 3600 secs \(peers ignore a longer heartbeat interval\)"),
    ("heartbeat", "99999999999999999999999", "more than 3600 secs"),  # overflowed the hello's u32 at start
    ("tcp_write_highwater", "99999999999999999999999", "more than 1099511627776 bytes"),  # the loop's C long
    ("max_payload", "100 MB", r"\(a message must fit one frame\)"),
    ("tcp_timeout", "1e22", "more than 315360000 secs"),
    ("idle_busy", 1 << 40, "more than 2147483647"),
])
def test_values_past_a_parameters_limit_are_refused(name: str, value: object, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as info:
        params.Parameters({name: value})
    assert info.value.field == name
    params.Parameters({"heartbeat": "1 hour", "max_payload": "63 MB", "tcp_write_highwater": "1 GB"})  # within


# ---------------------------------------------------------------- loading


def test_directory_loads_every_section() -> None:
    t = tree.load_dir(CONFIGS / "cfg_dir")
    assert [x.tport for x in t.transports] == ["mymesh", "mypgm", "mytcp", "myweb"]
    assert t.startup == tree.Startup(("myweb",), ("mymesh", "mytcp"))
    assert t.hosts == {"chex": "192.168.0.16", "dyna": "192.168.0.18"}
    assert t.groups == (tree.GroupConfig("ops", ("A", "B")),)
    assert t.parameters.heartbeat == 5.0
    assert t.parameters.reliability == 10.0
    assert t.parameters.tcp_noencrypt is True
    assert t.parameters.size("pub_window_size") == 10 << 20
    assert t.parameters.time("sub_window_time") == 60.0
    assert t.parameters.size("sub_window_size") == 8 << 20  # default still applies
    # the JSON file came in through an include of an included file
    assert any(s.endswith("groups.json") for s in t.sources)


def test_route_accessors_and_hosts_substitution() -> None:
    t = tree.load_dir(CONFIGS / "cfg_dir")
    mesh = t.transport("mymesh")
    assert mesh.listen == ["*"]
    assert mesh.connect == ["192.168.0.16", "192.168.0.18:5001"]
    assert mesh.port == 9000
    assert mesh.timeout == 0.0
    assert mesh.noencrypt is True
    assert mesh.cost == (1000, 1000, 1000, 1000)
    assert mesh.route["connect"] == ["chex", "dyna:5001"]  # raw value kept for save
    tcp = t.transport("mytcp")
    assert tcp.connect == ["192.168.0.16", "192.168.0.18"]
    assert tcp.cost == (100, 200, 100, 100)
    assert tcp.edge is True
    assert tcp.timeout == 15.0
    assert tcp.noencrypt is None
    pgm = t.transport("mypgm")
    assert pgm.cost == (100, 1000, 100, 100)
    assert pgm.number("mtu") == 16384
    assert pgm.listen == ["192.168.1.0;224.4.4.4"]
    assert t.transport("myweb").port == 8080


def test_cost_forms_of_the_manual() -> None:
    t = tree.load_text(
        "transports:\n"
        "  - tport: a_mesh\n    type: mesh\n    route:\n      cost: [ 100, 1000, 1000, 1000 ]\n"
        "  - tport: b_mesh\n    type: mesh\n    route:\n      cost: 10\n"
        "  - tport: c_mesh\n    type: mesh\n    route:\n      cost: 1\n      cost2: 2\n      cost3: 3\n"
        "      cost4: 4\n"
    )
    assert t.transport("a_mesh").cost == (100, 1000, 1000, 1000)
    assert t.transport("b_mesh").cost == (10, 10, 10, 10)
    assert t.transport("c_mesh").cost == (1, 2, 3, 4)



@pytest.mark.parametrize("cost", ["0", "4294967296", "[ 100, 0 ]"])
def test_a_cost_the_link_state_cannot_carry_is_refused_at_load(cost: str) -> None:
    """Costs are 1..2^32-1 (linkstate/records.py); a 0 or a 2^32 loaded, and then every
    link of the transport came up and was removed again with no word to the operator."""
    with pytest.raises(ConfigError, match=r"is not a cost \(1\.\.4294967295\)"):
        tree.load_text(f"transports:\n  - tport: m\n    type: mesh\n    route:\n      cost: {cost}\n")

def test_hosts_substitution_forms() -> None:
    hosts = {"chex": "192.168.0.16", "eth": "10.0.0.0"}
    assert tree.substitute_hosts("chex", hosts) == "192.168.0.16"
    assert tree.substitute_hosts("chex:5001", hosts) == "192.168.0.16:5001"
    assert tree.substitute_hosts("eth;224.4.4.4,225.5.5.5", hosts) == "10.0.0.0;224.4.4.4,225.5.5.5"
    assert tree.substitute_hosts("chexx:5001", hosts) == "chexx:5001"
    assert tree.substitute_hosts("*", hosts) == "*"


def test_manual_hosts_example() -> None:
    text = (CONFIGS / "cfg_dir" / "hosts.yaml").read_text() + (
        "transports:\n  - tport: net\n    type: mesh\n    route:\n"
        "      connect: chex:5001\n      listen: dyna:5000\nstartup:\n  connect:\n    - net\n"
    )
    t = tree.load_text(text)
    net = t.transport("net")
    assert net.connect == ["192.168.0.16:5001"]
    assert net.listen == ["192.168.0.18:5000"]
    assert t.startup.connect == ("net",)


def test_directory_equals_single_file() -> None:
    d = tree.load_dir(CONFIGS / "cfg_dir")
    f = tree.load_file(CONFIGS / "cfg_single.yaml")
    assert d == f
    # and the single-file form of a tree loads back to the same tree
    assert tree.from_dict(d.to_dict()) == d
    assert tree.load_text(tree.dump_yaml(d.to_dict())) == d


def test_json_file_and_stdin_load(tmp_path: Path) -> None:
    d = tree.load_dir(CONFIGS / "cfg_dir")
    path = tmp_path / "all.json"
    path.write_text(json.dumps(d.to_dict(), indent="\t"))
    assert tree.load(path) == d
    assert tree.load("-", stdin=io.StringIO(path.read_text())) == d
    assert tree.load(CONFIGS / "cfg_dir") == d


def test_parameters_section_is_optional() -> None:
    a = tree.load_text("parameters:\n  heartbeat: 5 secs\n  tcp_noencrypt: true\n")
    b = tree.load_text("heartbeat: 5 secs\ntcp_noencrypt: true\n")
    assert a == b
    assert b.parameters.heartbeat == 5.0


def test_listen_connect_parameters_join_startup() -> None:
    t = tree.load_text("listen: [ a, b ]\nconnect: c\nstartup:\n  listen: [ b, d ]\n")
    assert t.startup == tree.Startup(("a", "b", "d"), ("c",))
    assert "listen" not in t.parameters


def test_users_services_and_bare_records() -> None:
    t = tree.load_text(
        "services:\n  - svc: test\n    create: 1663653977.579093187\n    pub: PUB\n    users:\n"
        "      A: SIG\n"
        "---\nuser: A\nsvc: test\ncreate: '1663653977.5'\npub: UPUB\nexpires: null\n"
        "---\ntport: t\ntype: tcp\n"
        "---\ngroup: g\nusers: A\n"
    )
    svc = t.service("test")
    assert svc.create == "1663653977.579093187"  # the plain float kept its digits
    assert svc.users == {"A": "SIG"}
    assert t.user("A").pub == "UPUB"
    assert t.user("A").expires is None
    assert t.transport("t").type == "tcp"
    assert t.groups[0].users == ("A",)
    with pytest.raises(ConfigError, match="not configured"):
        t.user("Z")


def test_include_missing_file_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("heartbeat: 1 sec\ninclude: nothere.yaml\n")
    with pytest.raises(ConfigError) as info:
        tree.load_dir(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'config.yaml'}:2: include: ")
    assert "does not exist" in str(info.value)


def test_include_loops_load_each_file_once(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("include: '*.yaml'\n")
    (tmp_path / "a.yaml").write_text("include: config.yaml\nheartbeat: 2 secs\n")
    t = tree.load_dir(tmp_path)
    assert t.parameters.heartbeat == 2.0
    assert len(t.sources) == 2


def test_directory_without_config_yaml_includes_all(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("heartbeat: 3 secs\n")
    assert tree.load_dir(tmp_path).parameters.heartbeat == 3.0


def test_later_transport_definition_wins(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("tport: x\ntype: tcp\nroute:\n  port: 1\n")
    (tmp_path / "b.yaml").write_text("tport: x\ntype: tcp\nroute:\n  port: 2\n")
    assert tree.load_dir(tmp_path).transport("x").port == 2


# ---------------------------------------------------------------- errors


def _error(text: str, name: str, tmp_path: Path) -> str:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        tree.load_file(path)
    assert isinstance(info.value, RaimsError)
    return str(info.value)


def test_error_message_of_the_issue(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text('include: "*.yaml"\n')
    (tmp_path / "config" / "tport_x.yaml").write_text("tport: x\ntype: tcp\nroute:\n  port: abc\n")
    with pytest.raises(ConfigError) as info:
        tree.load_dir(tmp_path / "config")
    assert str(info.value) == f"{tmp_path}/config/tport_x.yaml:4: port: 'abc' is not a number"
    assert info.value.line == 4
    assert info.value.field == "port"


def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    """ms_server exits 2 with the file named, and SIGHUP logs `reload failed`, as for
    every other bad configuration (it was a UnicodeDecodeError traceback)."""
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"tport: x\n\xff\xfe")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        tree.load(bad)


def test_fixture_bad_port() -> None:
    with pytest.raises(ConfigError) as info:
        tree.load_file(CONFIGS / "cfg_bad_port.yaml")
    assert str(info.value).endswith("cfg_bad_port.yaml:5: port: 'abc' is not a number")


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("heartbeat: soon\n", 1, "heartbeat: 'soon' is not a time"),
        ("a: 1\nparameters:\n  tcp_noencrypt: maybe\n", 3, "tcp_noencrypt: 'maybe' is not a boolean"),
        ("transports:\n  - tport: x\n    type: carrier_pigeon\n", 3, "type: 'carrier_pigeon' is not a transport type"),
        ("transports:\n  - tport: x\n    type: tcp\n    route:\n      cost: [1, 2, 3, 4, 5]\n", 5,
         "cost: 5 costs given"),
        ("transports:\n  - tport: x\n    type: tcp\n    route:\n      port: 70000\n", 5, "port: 70000 is not a port"),
        ("transports:\n  - tport: x\n    type: tcp\n    route:\n      timeout: never\n", 5, "timeout: 'never'"),
        ("transports:\n  - tport: x\n    type: tcp\n    route:\n      noencrypt: 2\n", 5, "noencrypt: 2"),
        ("transports:\n  - type: tcp\n", 2, "tport: missing value"),
        ("users:\n  - user: A\n    svc: s\n    create: '1'\n    colour: red\n    pub: P\n", 5,
         "colour: unknown user field"),
        ("users:\n  - user: A\n    svc: s\n    create: '1'\n", 2, "pub: missing value"),
        ("services:\n  - svc: s\n    create: '1'\n    pub: P\n    users: [A]\n", 5, "users: expected a mapping"),
        ("startup:\n  listen: [a]\n  later: [b]\n", 3, "later: unknown startup field"),
        ("hosts: [a, b]\n", 1, "hosts: expected a mapping"),
        ("weird:\n  nested: 1\n", 1, "weird: unknown section"),
        ("heartbeat: 1 sec\nheartbeat: 2 secs\n", 2, "heartbeat: key 'heartbeat' repeated"),
        ("transports:\n  - tport: [x\n", 3, ""),
    ],
)
def test_errors_name_file_line_and_field(text: str, line: int, fragment: str, tmp_path: Path) -> None:
    msg = _error(text, "c.yaml", tmp_path)
    assert msg.startswith(f"{tmp_path / 'c.yaml'}:{line}: "), msg
    assert fragment in msg


def test_conflicting_user_definitions_are_an_error(tmp_path: Path) -> None:
    rec = "users:\n  - user: A\n    svc: s\n    create: '1'\n    pub: {}\n"
    (tmp_path / "a.yaml").write_text(rec.format("P1"))
    (tmp_path / "b.yaml").write_text(rec.format("P2"))
    with pytest.raises(ConfigError, match="also defined at .*a.yaml:2 with different keys"):
        tree.load_dir(tmp_path)
    (tmp_path / "b.yaml").write_text(rec.format("P1"))
    assert len(tree.load_dir(tmp_path).users) == 1


def test_missing_sources() -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        tree.load_dir("/nonexistent/raims")
    with pytest.raises(ConfigError, match="does not exist"):
        tree.load("/nonexistent/raims.yaml")
    with pytest.raises(ConfigError, match="not configuration data"):
        tree.from_dict({"parameters": {"x": object()}})


# ---------------------------------------------------------------- save


def test_save_writes_manual_files_and_reloads(tmp_path: Path) -> None:
    t = tree.load_dir(CONFIGS / "cfg_dir")
    ops = tree.save(t, tmp_path)
    names = sorted(op.path.name for op in ops)
    assert names == sorted(["config.yaml", "param.yaml", "startup.yaml", "tport_mymesh.yaml",
                            "tport_mypgm.yaml", "tport_mytcp.yaml", "tport_myweb.yaml"])
    assert all(op.op == "create file" for op in ops)
    assert {op.path.name: op.description for op in ops}["startup.yaml"] == "startup config"
    back = tree.load_dir(tmp_path)
    assert (back.transports, back.parameters, back.startup) == (t.transports, t.parameters, t.startup)
    # the tport file is the manual's bare record
    assert (tmp_path / "tport_mymesh.yaml").read_text().startswith("tport: mymesh\ntype: mesh\nroute:\n")
    # nothing changed: nothing written
    assert tree.save(t, tmp_path) == []
    changed = tree.load_text(tree.dump_yaml({**t.to_dict(), "parameters": {"heartbeat": "1 sec"}}))
    ops = tree.save(changed, tmp_path)
    assert [(op.op, op.path.name, op.description) for op in ops] == [
        ("update file", "param.yaml", "parameter config")
    ]
    assert str(ops[0]).startswith("update file ")
    assert tree.load_dir(tmp_path).parameters.heartbeat == 1.0
