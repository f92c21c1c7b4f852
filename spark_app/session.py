"""The SparkSession a rollout runs in, locally or on a cluster, and whether it has Delta.

DESIGN.md "Spark environment" and "Delta without Maven"; issue "The main job" (facts
measured on this machine). For a local master (`local[N]`, `local-cluster[W,C,M]`):
- `PYSPARK_PYTHON` is this interpreter (else the workers run the system python) and
  `SPARK_LOCAL_IP` is 127.0.0.1 (else Spark binds the external interface and does a DNS
  lookup); both must be in the environment before the JVM starts, so they are set there.
- driver memory is at least 2g, dynamic allocation is off, the UI is off, shuffles use
  few partitions (snapshots are small) and the session time zone is UTC, the lake's.
- JVM start-up: a dynamic class-data-sharing archive of the classes a Spark session
  loads, plus `-XX:TieredStopAtLevel=1` (C1 only: start-up matters more than peak speed
  for these short jobs, and the C2 compiler threads compete for the 2 cores), for the driver
  and the executors. Measured here with `python -m spark_app.session --measure` (2 cores,
  load ~3.5), session start + first job: local[2] 15.2 s -> 5.4 s, local-cluster[2,1,1024]
  44.9 s -> 9.4 s; C1-only takes about 1.5 s more off than the archive alone. The archive
  is built once per (java, pyspark, Spark home) by a throw-away session in a subprocess
  (25-45 s, 150 MB) and kept under the cache directory
  (`$RAIMS_CACHE_DIR`, else `$XDG_CACHE_HOME/raims`, else `~/.cache/raims`), never in the
  repository.
- local-cluster executors keep their work directories under `$SPARK_HOME/work`; for a
  pip-installed pyspark that is inside the venv, so, unless SPARK_HOME is set, Spark home
  is a directory of symbolic links to the pyspark package in the cache directory.
On a cluster (master None: spark-submit or Databricks decide) nothing is changed; the
session is only checked (dynamic allocation must be off for the barrier stage).

Executors without the raims package (issue 11) get the relocatable environment that
`make dist` packs (dist/raims-env.tar.gz, venv-pack): with `archive`, the session ships
it as `spark.archives=<PATH>#environment` and the executors' Python is
`./environment/bin/python`, while the driver keeps its own interpreter. PySpark takes the
workers' interpreter from the driver's PYSPARK_PYTHON when the context starts (the
`spark.pyspark.python` setting only reaches spark-submit's launcher), so that variable is
set too. Decisions: a local path must exist (else the message says to run `make dist`) and
is made absolute; a URL (hdfs:, s3a:, dbfs:...) is passed as is; the archive is refused on
local[N], whose Python workers are the driver's and run in its directory, where
./environment is never unpacked (local-cluster executors unpack it in their own work
directories, like a cluster's); and it cannot be added to a session that already runs.

Delta is detected by asking Spark to resolve the `delta` data source, never by loading
delta-spark's Maven package (which fails offline at session start).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

from pyspark.sql import SparkSession

from spark_app.errors import SessionError

LOCAL_CLUSTER_MASTER: Final = "local-cluster[2,1,1024]"
TEST_MASTER: Final = "local[2]"
DEFAULT_APP_NAME: Final = "raims"
DEFAULT_DRIVER_MEMORY: Final = "2g"
MIN_DRIVER_MEMORY_MB: Final = 2048
LOCAL_SHUFFLE_PARTITIONS: Final = 4
LOOPBACK: Final = "127.0.0.1"
CACHE_ENV: Final = "RAIMS_CACHE_DIR"
FAST_JIT_OPTION: Final = "-XX:TieredStopAtLevel=1"
# Signed jars cannot be archived; the JVM warns about each class on stdout.
CDS_QUIET_OPTIONS: Final = "-Xlog:cds=off -Xlog:cds+dynamic=off"
CDS_BUILD_TIMEOUT_S: Final = 300.0
JVM_EXIT_TIMEOUT_S: Final = 120.0
DATA_SOURCE_NOT_FOUND: Final = "DATA_SOURCE_NOT_FOUND"
ARCHIVE_ALIAS: Final = "environment"
ARCHIVE_PYTHON: Final = f"./{ARCHIVE_ALIAS}/bin/python"

_MEMORY = re.compile(r"^(\d+)([kmgt]?)b?$", re.IGNORECASE)
_MEMORY_MB: Final = {"k": 1 / 1024, "m": 1, "": 1 / (1024 * 1024), "g": 1024, "t": 1024 * 1024}
_PACKAGE_ROOT: Final = Path(__file__).resolve().parent.parent
log = logging.getLogger("raims.spark")


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith(("local[", "local-cluster["))


def memory_mb(text: str) -> float:
    """Megabytes of a JVM memory setting such as `2g` or `1536m`."""
    m = _MEMORY.match(text.strip())
    if m is None:
        raise SessionError(f"bad memory setting {text!r} (expected e.g. 2g or 2048m)")
    return int(m.group(1)) * _MEMORY_MB[m.group(2).lower()]


def cache_dir() -> Path:
    """Where session caches live: `$RAIMS_CACHE_DIR`, else the XDG cache dir's raims/."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "raims"


def find_java() -> Path:
    java_home = os.environ.get("JAVA_HOME")
    found = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not found or not os.access(found, os.X_OK):
        raise SessionError(
            "no java found (JAVA_HOME or PATH): install a JRE 17+, e.g. openjdk-17-jre-headless"
        )
    return Path(found).resolve()


def pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def shadow_spark_home(cache: Path) -> Path:
    """A Spark home of symbolic links to the pyspark package, so that local-cluster work
    directories land in the cache rather than in the venv. Built once per pyspark
    install, atomically: the cache is shared by every checkout of the user, and a home
    named by the version alone linked into the first checkout's venv (Spark failed with
    no `bin/spark-submit` once that checkout was deleted)."""
    import pyspark

    home = pyspark_home()
    where = hashlib.sha256(str(home).encode()).hexdigest()[:12]
    target = cache / f"spark-home-{pyspark.__version__}-{where}"
    if target.is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".spark-home-", dir=cache))
    for entry in home.iterdir():
        if entry.name != "work":
            (staging / entry.name).symlink_to(entry)
    try:
        staging.rename(target)
    except OSError:  # another process won the race; its copy is identical
        shutil.rmtree(staging, ignore_errors=True)
    return target


def cds_archive_path(cache: Path, spark_home: Path, java: Path) -> Path:
    """The archive for this java, pyspark and Spark home: any change makes a new one."""
    import pyspark

    key = f"{java}|{java.stat().st_mtime_ns}|{pyspark.__version__}|{spark_home}"
    return cache / "cds" / f"spark-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def _subprocess_env(spark_home: Path) -> dict[str, str]:
    """The environment of a `python -m spark_app.session` child: this Spark home, and
    spark_app importable (it is not an installed package)."""
    path = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, SPARK_HOME=str(spark_home), PYTHONPATH=path)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_cds_archive(archive: Path, spark_home: Path) -> Path | None:
    """`archive`, built first if missing by a throw-away session in a subprocess.

    Returns None (and logs why) when it cannot be built: the archive only saves time.
    """
    if archive.is_file():
        return archive
    with _file_lock(archive.with_suffix(".lock")):
        if archive.is_file():
            return archive
        partial = archive.with_suffix(f".{os.getpid()}.part")
        t0 = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "spark_app.session", "--train-cds", str(partial)],
                env=_subprocess_env(spark_home),
                capture_output=True,
                text=True,
                timeout=CDS_BUILD_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            log.warning(
                "building the JVM class archive took over %ss; going without", CDS_BUILD_TIMEOUT_S
            )
            partial.unlink(missing_ok=True)
            return None
        if done.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
            log.warning(
                "building the JVM class archive failed (exit %s): %s",
                done.returncode,
                done.stderr[-2000:],
            )
            partial.unlink(missing_ok=True)
            return None
        partial.rename(archive)
        log.info("built JVM class archive %s in %.1fs", archive, time.perf_counter() - t0)
        return archive


def jvm_options(*, archive: Path | None, fast_jit: bool) -> str:
    opts = [f"-XX:SharedArchiveFile={archive}", CDS_QUIET_OPTIONS] if archive else []
    if fast_jit:
        opts.append(FAST_JIT_OPTION)
    return " ".join(opts)


def archive_conf(archive: str, *, python: str = sys.executable) -> dict[str, str]:
    """The settings that run the executors' Python from the environment archive
    `archive` (a path or URL, without a #fragment), the driver's from `python` (pure)."""
    if not archive or "#" in archive:
        raise SessionError(
            f"environment archive {archive!r}: give the archive's path or URL without "
            f"a #fragment (it is unpacked as #{ARCHIVE_ALIAS})"
        )
    return {
        "spark.archives": f"{archive}#{ARCHIVE_ALIAS}",
        "spark.pyspark.python": ARCHIVE_PYTHON,
        "spark.pyspark.driver.python": python,
        "spark.executorEnv.PYSPARK_PYTHON": ARCHIVE_PYTHON,
    }


def resolve_archive(archive: str) -> str:
    """`archive` made absolute when it is a local path, which must exist; a URL as is."""
    if re.match(r"^[A-Za-z][\w+.-]*:", archive) and not archive.startswith("file:"):
        return archive
    path = Path(archive.removeprefix("file:")).expanduser().resolve()
    if not path.is_file():
        raise SessionError(
            f"environment archive {archive!r} not found: run `make dist` to build "
            "dist/raims-env.tar.gz"
        )
    return str(path)


def local_conf(
    master: str,
    *,
    app_name: str = DEFAULT_APP_NAME,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    java_options: str = "",
    python: str = sys.executable,
    archive: str | None = None,
) -> dict[str, str]:
    """The Spark settings of a local session (pure: no JVM, no environment); with
    `archive`, its executors run the Python of that environment archive."""
    if not is_local_master(master):
        raise SessionError(f"{master!r} is not a local master (local[N] or local-cluster[...])")
    if archive is not None and not master.startswith("local-cluster["):
        raise SessionError(
            f"an environment archive needs executors of their own (local-cluster[...] or a "
            f"cluster), not {master!r}, whose Python workers are the driver's"
        )
    if memory_mb(driver_memory) < MIN_DRIVER_MEMORY_MB:
        raise SessionError(
            f"driver memory {driver_memory} is below the {MIN_DRIVER_MEMORY_MB}m a rollout needs"
        )
    conf = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.driver.memory": driver_memory,
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.dynamicAllocation.enabled": "false",
        "spark.pyspark.python": python,
        "spark.pyspark.driver.python": python,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(LOCAL_SHUFFLE_PARTITIONS),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.executorEnv.PYSPARK_PYTHON": python,
        "spark.executorEnv.SPARK_LOCAL_IP": LOOPBACK,
    }
    if java_options:
        conf["spark.driver.extraJavaOptions"] = java_options
        conf["spark.executor.extraJavaOptions"] = java_options
    if archive is not None:
        conf.update(archive_conf(archive, python=python))
    return conf


def build_session(
    master: str | None = LOCAL_CLUSTER_MASTER,
    *,
    app_name: str = DEFAULT_APP_NAME,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    fast_start: bool = True,
    conf: Mapping[str, str] | None = None,
    cache: Path | None = None,
    archive: str | None = None,
) -> SparkSession:
    """The session for a rollout on `master`, or on the cluster's own master when None.

    A local session is configured as the module docstring says; `fast_start` adds the
    class-data-sharing archive (built on first use) and C1-only JIT. `conf` adds or
    overrides settings. An active session is reused if it runs on `master`. `archive`
    (the `make dist` environment archive) is what the executors' Python runs from.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        running = active.sparkContext.master
        if master is not None and running != master:
            raise SessionError(
                f"a session on {running!r} is already active; "
                f"stop it before starting one on {master!r}"
            )
        if archive is not None:
            raise SessionError(
                f"a session on {running!r} is already active: the environment archive "
                f"{archive} must be given when it starts (spark-submit --archives "
                f"{archive}#{ARCHIVE_ALIAS} --conf spark.pyspark.python={ARCHIVE_PYTHON})"
            )
        require_static_allocation(active)
        return active
    shipped = resolve_archive(archive) if archive is not None else None
    if master is None:
        settings = {"spark.app.name": app_name}
        if shipped is not None:
            settings.update(archive_conf(shipped))
    else:
        settings = _prepare_local(
            master,
            app_name,
            driver_memory,
            fast_start,
            cache if cache is not None else cache_dir(),
            shipped,
        )
    for key, value in (conf or {}).items():
        joined = key.endswith("extraJavaOptions") and key in settings
        settings[key] = f"{settings[key]} {value}" if joined else value
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    if shipped is not None and "://" not in shipped:
        driver_environment(Path(shipped), Path.cwd() / ARCHIVE_ALIAS)
    with _workers_python(settings.get("spark.pyspark.python") if shipped else None):
        spark = builder.getOrCreate()
    require_static_allocation(spark)
    return spark


def driver_environment(archive: Path, target: Path) -> Path:
    """The archive unpacked beside the driver as well: Spark runs some Python workers from
    the driver's JVM (a Python data source's planning), with the executors' relative
    `./environment/bin/python`, so the driver's working directory needs it too. Unpacked
    again only when the archive changed (a marker records its size and mtime)."""
    stamp = f"{archive.resolve()} {archive.stat().st_size} {archive.stat().st_mtime_ns}"
    marker = target / ".raims-archive"
    if marker.is_file() and marker.read_text() == stamp:
        return target
    import tarfile

    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="tar")
    marker.write_text(stamp)
    return target


@contextlib.contextmanager
def _workers_python(python: str | None) -> Iterator[None]:
    """PYSPARK_PYTHON set to `python` (when given) while a context starts: the context
    keeps the value it read, and later sessions of this process are not affected."""
    if python is None:
        yield
        return
    before = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = python
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = before


def _prepare_local(
    master: str,
    app_name: str,
    driver_memory: str,
    fast_start: bool,
    cache: Path,
    env_archive: str | None,
) -> dict[str, str]:
    """Environment and settings for a local session (the JVM reads its environment once)."""
    if env_archive is not None:  # fail before the environment changes or a JVM starts
        local_conf(master, archive=env_archive)
    java = find_java()
    _set_local_environment(cache)
    cds = None
    if fast_start:
        spark_home = Path(os.environ["SPARK_HOME"])
        cds = ensure_cds_archive(cds_archive_path(cache, spark_home, java), spark_home)
    return local_conf(
        master,
        app_name=app_name,
        driver_memory=driver_memory,
        java_options=jvm_options(archive=cds, fast_jit=fast_start),
        archive=env_archive,
    )


def _set_local_environment(cache: Path) -> None:
    """What a local session's JVM and Python workers read from the environment: the
    workers' interpreter is PYSPARK_PYTHON (the spark.pyspark.python setting only reaches
    spark-submit), and SPARK_LOCAL_IP keeps Spark off the external interface."""
    if not os.environ.get("SPARK_HOME"):
        os.environ["SPARK_HOME"] = str(shadow_spark_home(cache))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK


def require_static_allocation(spark: SparkSession) -> None:
    """Raise unless dynamic allocation is off: a barrier stage needs fixed executors."""
    if (spark.conf.get("spark.dynamicAllocation.enabled", "false") or "").lower() == "true":
        raise SessionError(
            "spark.dynamicAllocation.enabled is true: the rollout's barrier "
            "stage needs it false (set it in the cluster or job config)"
        )


def has_delta(spark: SparkSession) -> bool:
    """Whether the session can read and write `format("delta")` (Databricks, or a cluster
    with the delta-spark jars): resolving the source on a path that does not exist fails
    with DATA_SOURCE_NOT_FOUND exactly when Spark has no Delta."""
    missing = Path(tempfile.gettempdir()) / f"raims-delta-probe-{uuid.uuid4().hex}"
    try:
        _ = spark.read.format("delta").load(str(missing)).schema
    except Exception as exc:  # classic Spark raises a bare Py4JJavaError for this one
        return DATA_SOURCE_NOT_FOUND not in str(exc)
    return True


def _train_cds(archive: Path) -> None:
    """Run a small session whose driver JVM dumps the classes it loaded into `archive`.

    The archive is written as the JVM exits, so wait for the JVM, not just for stop().
    """
    import pyarrow as pa
    from pyspark import SparkContext

    _set_local_environment(cache_dir())
    settings = local_conf(
        "local[1]",
        app_name="raims-cds",
        java_options=f"-XX:ArchiveClassesAtExit={archive} {CDS_QUIET_OPTIONS}",
    )
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    df = spark.createDataFrame(pa.table({"k": ["a", "b", "a"], "v": [1, 2, 3]}))
    df.groupBy("k").count().collect()
    df.mapInArrow(lambda batches: batches, df.schema).collect()
    spark.sql("SELECT date(current_timestamp()), count(*) FROM range(10)").collect()
    spark.stop()
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
    if proc is not None:
        proc.stdin.close()  # the gateway JVM exits on end of input
        proc.wait(timeout=JVM_EXIT_TIMEOUT_S)


def _time_session(master: str, fast_start: bool) -> dict[str, float]:
    t0 = time.perf_counter()
    spark = build_session(master, fast_start=fast_start, app_name="raims-measure")
    t1 = time.perf_counter()
    spark.range(1000).selectExpr("sum(id)").collect()
    t2 = time.perf_counter()
    spark.stop()
    return {"start_s": round(t1 - t0, 2), "first_job_s": round(t2 - t1, 2)}


def measure(masters: Sequence[str], repeat: int) -> list[dict[str, object]]:
    """Session start and first-job times, each in a fresh process, without and with the
    fast start (class archive built beforehand, so its one-time cost is not counted)."""
    cache = cache_dir()
    os.environ.setdefault("SPARK_HOME", str(shadow_spark_home(cache)))
    spark_home = Path(os.environ["SPARK_HOME"])
    ensure_cds_archive(cds_archive_path(cache, spark_home, find_java()), spark_home)
    env = _subprocess_env(spark_home)
    rows: list[dict[str, object]] = []
    for master in masters:
        for fast in (False, True):
            best: dict[str, float] = {}
            for _ in range(repeat):
                out = subprocess.run(
                    [sys.executable, "-m", "spark_app.session", "--time-session", master]
                    + ([] if fast else ["--slow"]),
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                    timeout=CDS_BUILD_TIMEOUT_S,
                )
                got = json.loads(out.stdout.strip().splitlines()[-1])
                best = {k: min(v, best.get(k, v)) for k, v in got.items()}
            rows.append(
                {
                    "master": master,
                    "fast_start": fast,
                    **best,
                    "total_s": round(sum(best.values()), 2),
                }
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_app.session", description="Spark session tools for raims."
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--build-cds",
        action="store_true",
        help="build the JVM class archive for the local session now",
    )
    group.add_argument(
        "--measure",
        nargs="*",
        metavar="MASTER",
        help=f"time session start without and with fast start (default {TEST_MASTER})",
    )
    group.add_argument("--train-cds", metavar="PATH", help=argparse.SUPPRESS)
    group.add_argument("--time-session", metavar="MASTER", help=argparse.SUPPRESS)
    parser.add_argument("--slow", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=1, help="runs per setting, best kept")
    args = parser.parse_args(argv)
    if args.train_cds:
        _train_cds(Path(args.train_cds))
    elif args.time_session:
        print(json.dumps(_time_session(args.time_session, fast_start=not args.slow)))
    elif args.build_cds:
        cache = cache_dir()
        home = Path(os.environ.get("SPARK_HOME") or shadow_spark_home(cache))
        archive = ensure_cds_archive(cds_archive_path(cache, home, find_java()), home)
        print(archive if archive else "the archive could not be built (see the log)")
        return 0 if archive else 1
    else:
        rows = measure(args.measure or [TEST_MASTER], args.repeat)
        cols = list(rows[0])
        print("  ".join(f"{c:>24}" for c in cols))
        for row in rows:
            print("  ".join(f"{row[c]!s:>24}" for c in cols))
        print(json.dumps({"bench": "spark_session", "results": rows}))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
