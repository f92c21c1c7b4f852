"""The console's renderers and command matching, on fixed inputs (no network)."""

from __future__ import annotations

import json

import pytest

from raims_node.console import (
    COMMANDS,
    AmbiguousCommand,
    BadArguments,
    CommandResult,
    Kind,
    UnknownCommand,
    render_json,
    render_text,
    resolve,
)
from raims_node.console.render import format_duration, format_mask, format_time

# The manual's "show tree" example (lex_a1), the rows it shows.
MANUAL_TREE = """\
cost | set | alt |  source  |     tport    |   dest
-----+-----+-----+----------+--------------+--------
1000 |   0 |   0 | lex_a1.* |  lex_amesh.2 |  lex_a2
1000 |   1 |   0 | lex_a1.* |  lex_amesh.3 |  lex_a3
1000 |   2 |   0 | lex_a1.* |  lex_amesh.4 |  lex_a4
1000 |   3 |   0 | lex_a1.* |  lex_amesh.5 |   lex_a
-----+-----+-----+----------+--------------+--------
2000 |   0 |   0 | lex_a.33 |    fo_mesh.7 |   edo_a
2000 |   2 |   0 | lex_a.33 |    fo_mesh.9 |  robo_a
2000 |   1 |   0 | lex_a.33 |    fo_mesh.8 |   lee_a
2000 |   4 |   0 | lex_a.33 |   fo_mesh.11 |   dex_a
2000 |   3 |   0 | lex_a.33 |   fo_mesh.10 |   pic_a
-----+-----+-----+----------+--------------+--------
3000 |   0 |   0 |  edo_a.5 |  edo_amesh.4 |  edo_a4
3000 |   1 |   0 |  edo_a.5 |  edo_amesh.5 |  edo_a3
3000 |   2 |   0 |  edo_a.5 |  edo_amesh.6 |  edo_a1
3000 |   3 |   0 |  edo_a.5 |  edo_amesh.7 |  edo_a2
3000 |   4 |   0 | robo_a.6 | robo_amesh.4 | robo_a3
3000 |   5 |   0 | robo_a.6 | robo_amesh.5 | robo_a2
"""


def _tree_result() -> CommandResult:
    cols = ["cost", "set", "alt", "source", "tport", "dest"]
    rows = []
    for line in MANUAL_TREE.splitlines()[2:]:
        if not line.startswith("-"):
            cells = [c.strip() for c in line.split("|")]
            rows.append({c: int(v) if v.isdigit() else v for c, v in zip(cols, cells, strict=True)})
    return CommandResult(cols, rows, group="cost")  # type: ignore[arg-type]


def test_text_reproduces_the_manual_show_tree_layout() -> None:
    assert render_text(_tree_result()) == MANUAL_TREE


def test_grouped_layout_blanks_the_group_column_on_continuation_rows() -> None:
    rows = [
        {"user": "chex.*", "adj": None, "tport": "ipc.0", "cost": 1000},
        {"user": "chex.*", "adj": "lex_a.1", "tport": "test.1", "cost": 1000},
        {"user": "lex_a.1", "adj": "edo_a.2", "tport": "fo_mesh.4", "cost": 1000},
    ]
    res = CommandResult(["user", "adj", "tport", "cost"], rows, group="user", blank_repeats=True)  # type: ignore[arg-type]
    assert render_text(res).splitlines() == [
        "  user  |   adj   |   tport   | cost",
        "--------+---------+-----------+-----",
        " chex.* |         |     ipc.0 | 1000",
        "        | lex_a.1 |    test.1 | 1000",
        "--------+---------+-----------+-----",
        "lex_a.1 | edo_a.2 | fo_mesh.4 | 1000",
    ]
    # the rows themselves keep every value: only the text leaves cells out
    assert json.loads(render_json(res)) == rows


def test_cells_print_by_kind_and_json_keeps_the_numbers() -> None:
    ns = 1679337454_182_000_000  # 2023-03-20 18:37:34.182 UTC
    res = CommandResult(
        ["user", "time", "lat", "prefix", "path", "bloom"],
        [{"user": "B.1", "time": ns, "lat": 4_610_000, "prefix": 0x04000108, "path": [0, 1, 2, 3],
          "bloom": ["B", "D"]}],
        kinds={"time": Kind.TIME, "lat": Kind.DURATION, "prefix": Kind.HEX},
    )
    assert render_text(res).splitlines()[2] == \
        " B.1 | 0320 18:37:34.182 | 4.61ms | 0x04000108 | 0,1,2,3 |  B, D"
    assert json.loads(render_json(res)) == res.rows


@pytest.mark.parametrize(("ns", "text"), [
    (189_000, "189us"), (154, "0.154us"), (-32_500, "-32.5us"), (4_610_000, "4.61ms"),
    (1_990_000_000, "1.99s"), (100_080 * 10**9, "27.8hr"), (0, "0us"),
])
def test_durations_scale_their_unit(ns: int, text: str) -> None:
    assert format_duration(ns) == text


def test_times_and_masks() -> None:
    assert format_time(1_700_000_000_000_000_000) == "1114 22:13:20.000"
    assert format_mask(0) == "0"
    assert format_mask(0x108) == "0x00000108"
    assert format_mask(0x61DF00C38000) == "0x000061DF00C38000"


def test_errors_and_plain_results() -> None:
    err = CommandResult.failed("unknown command 'x'")
    assert render_text(err) == "error: unknown command 'x'\n"
    assert json.loads(render_json(err)) == {"error": "unknown command 'x'"}
    plain = CommandResult.lines("graph", "start A\nnode A B\ntcp_ab A B : 200\n")
    assert render_text(plain) == "start A\nnode A B\ntcp_ab A B : 200\n"
    assert json.loads(render_json(plain)) == [{"graph": "start A"}, {"graph": "node A B"},
                                              {"graph": "tcp_ab A B : 200"}]
    empty = CommandResult(["user", "cost"])
    assert render_text(empty) == "user | cost\n-----+-----\n"


# ---------------------------------------------------------------- prefix matching


def _name(line: str) -> tuple[str, list[str]]:
    cmd, args = resolve(COMMANDS, line.split())
    return cmd.name, args


@pytest.mark.parametrize(("line", "name", "args"), [
    ("pi", "ping", []),
    ("ping B", "ping", ["B"]),
    ("pe", "show peers", []),
    ("adj", "show adjacency", []),
    ("show adj", "show adjacency", []),
    ("sh pe", "show peers", []),  # more keywords matched beats shutdown with an argument
    ("run t test", "show running transport", ["test"]),
    ("run", "show running", []),
    ("sub X.Y", "sub", ["X.Y"]),  # typed in full beats the prefix of show subs
    ("subs * DAEMON", "show subs", ["*", "DAEMON"]),
    ("inbox", "show inbox", []),
    ("rou 2", "show routes", ["2"]),
    ("show user A", "show users", ["A"]),
])
def test_prefixes_name_one_command(line: str, name: str, args: list[str]) -> None:
    assert _name(line) == (name, args)


def test_ambiguous_prefix_lists_the_candidates() -> None:
    with pytest.raises(AmbiguousCommand) as exc:
        resolve(COMMANDS, ["p"])
    for candidate in ("ping", "psub", "pub", "punsub", "show peers", "show ports", "show path"):
        assert candidate in str(exc.value)
    with pytest.raises(AmbiguousCommand, match="show counters.*show cost|show cost.*show counters"):
        resolve(COMMANDS, ["co"])


def test_incomplete_and_unknown_commands() -> None:
    with pytest.raises(AmbiguousCommand, match="incomplete command 'show': show adjacency"):
        resolve(COMMANDS, ["show"])
    with pytest.raises(UnknownCommand, match="'xyz'"):
        resolve(COMMANDS, ["xyz"])
    with pytest.raises(UnknownCommand):
        resolve(COMMANDS, [])


def test_arguments_are_counted_and_the_last_message_takes_the_rest() -> None:
    pub, args = resolve(COMMANDS, ["pub", "X.Y", "hello", "big", "world"])
    assert pub.bind(args) == ["X.Y", "hello big world"]
    path, args = resolve(COMMANDS, ["path", "1", "2"])
    with pytest.raises(BadArguments, match=r"show path takes \[P\], got 2"):
        path.bind(args)
    match, _ = resolve(COMMANDS, ["show", "match"])
    with pytest.raises(BadArguments, match="got 0"):
        match.bind([])


def test_every_command_has_a_unique_name() -> None:
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    assert "help" in names


def test_control_characters_in_cells_are_shown_escaped() -> None:
    """A subject from another client may hold ESC or BEL: the operator's terminal gets
    them escaped (ESC [2J would clear it); JSON carries the text as it is."""
    result = CommandResult(["subject"], [{"subject": "a\x1b[2Jb\x07\u202ec"}])
    text = render_text(result)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "a\\x1b[2Jb\\x07\\u202ec" in text
    assert json.loads(render_json(result)) == [{"subject": "a\x1b[2Jb\x07\u202ec"}]
