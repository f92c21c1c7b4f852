"""`spark-submit spark_app/raims_rollout.py`: deploy a Rai MS network on the executor hosts,
prove that it converged and carries traffic, and snapshot it into Delta tables.

Issue "The main job", item 1; the stages are spark_app.controller's. Also runs as
`python spark_app/raims_rollout.py`, which starts its own session.

    raims_rollout.py [--config conf/rollout.yaml] [--master URL] [--nodes-per-host N]
                     [--topology mesh | --topology graph FILE] [--lake PATH] [--keys-dir PATH]
                     [--run-dir PATH] [--archive PATH] [--keep-running] [--no-queries] [--teardown]

Decisions:
- The master: --master, else the config's `master`, else the one spark-submit or the
  Databricks runtime set up (that session is used as it is), else local-cluster[2,1,1024].
- Output: one line per stage with its time, then the summary tables, then (unless
  --no-queries) a few SQL queries over the lake's views. Exit status 0 when every stage
  passed, 1 when one failed (its message names what to look at), 2 for bad arguments.
- Executors without the raims package: --archive (else $RAIMS_ENV_ARCHIVE) ships the
  `make dist` environment archive with the session (spark_app.session); without it, the
  rollout's import probe fails and says how to get raims onto the executors.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a file, this directory is sys.path[0], where spark_app's modules would shadow
# top-level ones; the repository root is what must be importable.
_HERE = Path(__file__).resolve().parent
if sys.path and Path(sys.path[0] or ".").resolve() == _HERE:
    sys.path[0] = str(_HERE.parent)
elif str(_HERE.parent) not in sys.path:
    sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import TYPE_CHECKING, Final  # noqa: E402

if TYPE_CHECKING:
    from spark_app.settings import Settings

DEFAULT_CONFIG: Final = _HERE.parent / "conf" / "rollout.yaml"
APP_NAME: Final = "raims-rollout"
EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
# set in the driver's environment by spark-submit's Python runner, and by Databricks
LAUNCHED_BY: Final = ("PYSPARK_GATEWAY_PORT", "DATABRICKS_RUNTIME_VERSION")
ARCHIVE_ENV: Final = "RAIMS_ENV_ARCHIVE"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="raims_rollout.py",
        description="Deploy a Rai MS network on the Spark executor hosts, check that it converged "
                    "and carries traffic, and snapshot every node's state into Delta tables.",
        epilog="Stages: keys, start, converge, traffic, collect, write, validate. Example: "
               "spark-submit --master yarn --conf spark.dynamicAllocation.enabled=false "
               "spark_app/raims_rollout.py --lake /data/raims/lake",
    )
    ap.add_argument("--config", type=Path,
                    default=DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None,
                    help="rollout settings (YAML; default conf/rollout.yaml): service, topology, "
                         "transports, parameters, lake, run_dir, timeouts")
    ap.add_argument("--master", help="Spark master (default: the config's, spark-submit's, "
                                     "or local-cluster[2,1,1024])")
    ap.add_argument("--nodes-per-host", type=int, metavar="N",
                    help="daemons per executor host (default: 1 on a cluster, 4 nodes in all on a local master)")
    ap.add_argument("--topology", nargs="+", metavar=("mesh|graph", "FILE"),
                    help="'mesh' (every node in one mesh) or 'graph FILE' (the manual's graph text; "
                         "nodes are placed on hosts in node-line order)")
    ap.add_argument("--lake", help="directory of the Delta tables (the service keys go to its keys/)")
    ap.add_argument("--keys-dir", help="local directory for the service keys (default: the lake's keys/; "
                                       "needed when the lake is not a local directory)")
    ap.add_argument("--run-dir", help="directory, on every host, of the daemons' configs, pid files and logs")
    ap.add_argument("--archive", metavar="PATH", default=os.environ.get(ARCHIVE_ENV) or None,
                    help="environment archive built by `make dist` (dist/raims-env.tar.gz) for executors "
                         f"that do not have the raims package (default ${ARCHIVE_ENV})")
    ap.add_argument("--teardown", action="store_true",
                    help="stop every daemon of the service on every host (by pid file) and exit")
    ap.add_argument("--keep-running", action="store_true",
                    help="leave the daemons running when a local run ends or a stage fails")
    ap.add_argument("--no-queries", action="store_true", help="do not print the SQL queries at the end")
    ap.add_argument("--audit-only", action="store_true",
                    help="only run the routing, bloom and link-state audits of an existing snapshot (--snapshot)")
    ap.add_argument("--snapshot", metavar="ID", help="the snapshot id to audit with --audit-only")
    args = ap.parse_args(argv)
    if args.topology is not None:
        kind, rest = args.topology[0], args.topology[1:]
        if kind == "mesh" and not rest:
            args.topology = "mesh"
        elif kind == "graph" and len(rest) == 1:
            args.topology = rest[0]
        else:
            ap.error(f"--topology takes 'mesh' or 'graph FILE', not {' '.join(args.topology)!r}")
    if args.nodes_per_host is not None and args.nodes_per_host < 1:
        ap.error("--nodes-per-host must be at least 1")
    if args.audit_only and not args.snapshot:
        ap.error("--audit-only needs --snapshot ID")
    if args.snapshot and not args.audit_only:  # ignored, it ran a whole rollout
        ap.error("--snapshot ID goes with --audit-only")
    if args.teardown and args.audit_only:
        ap.error("--teardown and --audit-only are different runs: give one")
    return args


def resolve_master(cli: str | None, configured: str | None) -> str | None:
    """The master to build the session on; None keeps the one spark-submit (or the
    Databricks runtime) set up."""
    from spark_app.session import LOCAL_CLUSTER_MASTER

    if cli or configured:
        return cli or configured
    return None if any(os.environ.get(v) for v in LAUNCHED_BY) else LOCAL_CLUSTER_MASTER


def main(argv: Sequence[str] | None = None) -> int:
    from spark_app.errors import SparkAppError
    from spark_app.settings import load_settings

    args = parse_args(argv)
    try:
        settings = load_settings(args.config, lake=args.lake) if args.audit_only else load_settings(
            args.config, nodes_per_host=args.nodes_per_host, topology=args.topology, lake=args.lake,
            keys_dir=args.keys_dir, run_dir=args.run_dir, keep_running=args.keep_running or None,
            queries=False if args.no_queries else None)
    except SparkAppError as exc:
        print(f"raims_rollout: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.audit_only:
        from spark_app.jobs.audit import audit_only

        args.lake = str(settings.lake)
        args.master = resolve_master(args.master, settings.master)
        try:
            return audit_only(args)
        except SparkAppError as exc:
            print(f"raims_rollout: {exc}", file=sys.stderr)
            return EXIT_FAILED
    if args.teardown:  # stops the service's daemons, a running rollout's too: no lock
        return _rollout(args, settings)
    from spark_app.runlock import run_lock

    with contextlib.ExitStack() as held:
        try:  # before the Spark session: a second rollout is refused at once, not after ~9 s
            held.enter_context(run_lock(settings.run_dir, settings.service))
        except SparkAppError as exc:
            print(f"raims_rollout: {exc}", file=sys.stderr)
            return EXIT_FAILED
        return _rollout(args, settings, locked=True)


def _rollout(args: argparse.Namespace, settings: Settings, locked: bool = False) -> int:
    """The session, then the rollout (or the teardown); `locked`: main holds run_lock."""
    from spark_app.controller import Rollout, RolloutFailed, progress_line
    from spark_app.errors import SparkAppError
    from spark_app.session import build_session

    master = resolve_master(args.master, settings.master)
    print(f"raims rollout: service {settings.service}, master {master or '(as launched)'}, "
          f"topology {settings.topology}, lake {settings.lake}, run dir {settings.run_dir}"
          + (f", executor environment {args.archive}" if args.archive else ""), flush=True)
    t0 = time.perf_counter()
    try:
        spark = build_session(master, app_name=APP_NAME, archive=args.archive)
    except SparkAppError as exc:
        print(f"raims_rollout: {exc}", file=sys.stderr)
        return EXIT_FAILED
    spark.sparkContext.setLogLevel("ERROR")
    rollout = Rollout(settings, spark, say=lambda line: print(line, flush=True))
    seconds = time.perf_counter() - t0
    rollout.outcome.stages["session"] = round(seconds, 3)
    print(progress_line("session", seconds, f"{spark.sparkContext.master}, Spark {spark.version}"), flush=True)
    status = EXIT_OK
    signal.signal(signal.SIGTERM, _interrupt)  # as Ctrl-C: the run is recorded failed and torn down
    try:
        if args.teardown:
            rollout.stop_all()
            return EXIT_OK
        rollout.run(locked=locked)
        print("\n" + rollout.summary())
        if settings.queries:
            t0 = time.perf_counter()
            results = rollout.queries()
            print("\n" + progress_line("queries", time.perf_counter() - t0, f"{len(results)} SQL queries over the lake"))
            for sql, result in results:
                print(f"\n{sql}\n{result}")
    except RolloutFailed as exc:
        print("\n" + rollout.summary())
        print(f"\nrollout FAILED: {exc}", file=sys.stderr)
        status = EXIT_FAILED
    except SparkAppError as exc:
        print(f"\nraims_rollout: {exc}", file=sys.stderr)
        status = EXIT_FAILED
    finally:
        if not os.environ.get("DATABRICKS_RUNTIME_VERSION"):  # Databricks owns its context
            try:
                spark.stop()
            except Exception as exc:  # a JVM killed with the process group: the run's status stands
                print(f"raims_rollout: stopping the Spark session: {type(exc).__name__}", file=sys.stderr)
    return status


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


if __name__ == "__main__":
    sys.exit(main())
