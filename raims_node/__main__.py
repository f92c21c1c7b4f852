"""`raims --version`; `raims lake maintain ...` (spark_app.maintain). `raims --help` and
`raims lake --help` list them; an unknown argument is a one-line usage error, exit 2."""

import argparse
import sys

from raims_node import __version__


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="raims", description="raims tools (the daemon is ms_server)")
    ap.add_argument("-V", "--version", action="version", version=f"raims {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    lake = sub.add_parser("lake", help="the Delta lake's tools", description="the Delta lake's tools")
    tools = lake.add_subparsers(dest="tool", metavar="TOOL", required=True)
    tools.add_parser("maintain", add_help=False,
                     help="compaction, checkpoint and vacuum (raims lake maintain --help)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:2] == ["lake", "maintain"]:  # the lake's tools live with the Spark app
        from spark_app.maintain import main as maintain

        return maintain(args[2:])
    ap = _parser()
    ap.parse_args(args)  # --help, --version and errors exit here
    ap.print_usage(sys.stderr)  # no command
    return 2


if __name__ == "__main__":
    sys.exit(main())
