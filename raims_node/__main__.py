"""`python -m raims_node --version`."""

import sys

from raims_node import __version__


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("--version", "-V"):
        print(f"raims {__version__}")
        return 0
    print("usage: python -m raims_node --version", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
