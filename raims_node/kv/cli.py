"""`ms_kv`: the manual's kv_server command, reduced to what a file map needs.

    ms_kv init PATH [--databases N] [--force]   create an empty map file (and its log)
    ms_kv info PATH                             keys per database, after replaying the log
"""

from __future__ import annotations

import argparse
import sys

from raims_node.kv import open_kv
from raims_node.kv.errors import KVError
from raims_node.kv.persist import init_map, map_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ms_kv", description="initialize or inspect a raims key-value map")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_init = sub.add_parser("init", help="create an empty map file")
    p_init.add_argument("path")
    p_init.add_argument("--databases", type=int, default=16)
    p_init.add_argument("--force", action="store_true", help="empty an existing map")
    p_info = sub.add_parser("info", help="keys per database")
    p_info.add_argument("path")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "init":
            if not 1 <= args.databases <= 1024:
                raise KVError("--databases must be in 1..1024")
            init_map(map_path(args.path), args.databases, args.force)
            print(f"map {map_path(args.path)} initialized with {args.databases} databases")
        else:
            engine, mf = open_kv(args.path)
            for i, d in enumerate(engine.store.dbs):
                if d.data:
                    print(f"db{i}: keys={len(d.data)} expires={len(d.expires)}")
            if not any(d.data for d in engine.store.dbs):  # say so, rather than print nothing
                print(f"map {map_path(args.path)}: no keys in its {len(engine.store.dbs)} databases")
            if mf is not None:
                mf.close()
    except KVError as exc:
        print(f"ms_kv: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
