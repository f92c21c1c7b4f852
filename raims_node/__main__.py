"""`python -m raims_node --version`; `raims lake maintain ...` (spark_app.maintain)."""

import sys

from raims_node import __version__


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:2] == ["lake", "maintain"]:  # the lake's tools live with the Spark app
        from spark_app.maintain import main as maintain

        return maintain(args[2:])
    if args and args[0] in ("--version", "-V"):
        print(f"raims {__version__}")
        return 0
    print("usage: raims --version | raims lake maintain --lake PATH [--retention-hours H]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
