"""Every console script of pyproject.toml (and the documented `python -m` tools): `--help`
prints the usage and exits 0; an unknown flag prints the usage and one error line and
exits 2, as argparse programs do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from raims_node import __main__ as raims_main
from raims_node import server
from raims_node.config import gen_key, test_adj
from raims_node.kv import cli as kv_cli
from raims_node.msglog import cli as msglog_cli
from spark_app import catalog

MAINS: dict[str, Callable[[list[str]], object]] = {
    "raims": raims_main.main,
    "raims lake": lambda a: raims_main.main(["lake", *a]),
    "ms_server": server.main,
    "rvd": lambda a: server._rvd(a, "rvd"),
    "ms_gen_key": gen_key.main,
    "ms_test_adj": test_adj.main,
    "ms_kv": kv_cli.main,
    "ms_msglog": msglog_cli.main,
    "spark_app.catalog": catalog.main,
}


def _exit(fn: Callable[[list[str]], object], argv: list[str]) -> int:
    with pytest.raises(SystemExit) as e:
        fn(argv)
    return int(e.value.code or 0)


@pytest.mark.parametrize("name", list(MAINS))
def test_help_exits_0_with_the_usage(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(MAINS[name], ["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: "), out


@pytest.mark.parametrize("name", list(MAINS))
def test_an_unknown_flag_is_one_error_line_and_exit_2(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(MAINS[name], ["--bogus"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and err.splitlines()[-1] == errors[0], err


def test_raims_with_no_command_shows_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert raims_main.main([]) == 2
    assert capsys.readouterr().err.startswith("usage: raims")


def test_catalog_help_has_its_whole_first_paragraph(capsys: pytest.CaptureFixture[str]) -> None:
    _exit(catalog.main, ["--help"])
    assert "`date` partition as a generated column" in " ".join(capsys.readouterr().out.split())


def test_ms_gen_key_without_a_service_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(gen_key.main, ["-u", "A"]) == 2
    assert "error: a service is required (-s SVC)" in capsys.readouterr().err


def test_lake_maintain_refuses_a_lake_that_is_no_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a mistyped --lake printed an empty table and exit 0; a negative retention
    or unknown --table were taken."""
    from spark_app.maintain import main as maintain

    assert maintain(["--lake", str(tmp_path / "nolake")]) == 1
    assert capsys.readouterr().err == f"raims lake maintain: lake {str(tmp_path / 'nolake')!r} is not a directory\n"
    assert maintain(["--lake", str(tmp_path)]) == 0
    assert "no Delta tables" in capsys.readouterr().err
    for bad in (["--retention-hours", "-5"], ["--table", "bogus"]):
        assert _exit(maintain, ["--lake", str(tmp_path), *bad]) == 2
        assert capsys.readouterr().err.splitlines()[-1].startswith("raims lake maintain: error: argument")


def test_ms_kv_info_of_an_empty_map_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `ms_kv info` of a map just made printed nothing."""
    path = str(tmp_path / "kv.map")
    assert kv_cli.main(["init", path]) == 0
    capsys.readouterr()
    assert kv_cli.main(["info", path]) == 0
    assert capsys.readouterr().out == f"map {path}: no keys in its 16 databases\n"


@pytest.mark.parametrize(("flags", "words"), [(["-d", "-"], "-d -"), (["-b"], "-b")])
def test_ms_server_console_with_stdin_config_or_detached_is_a_usage_error(
        flags: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `-d - -c` started the node and exited 0 at once (the console read EOF);
    `-b -c` detached a node whose console read the starter's stdin."""
    assert _exit(server.main, [*flags, "-c"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("ms_server: error: -c") and words in err, err
