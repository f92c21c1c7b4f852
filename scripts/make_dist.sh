#!/usr/bin/env bash
# `make dist`: the raims wheel and a relocatable environment for Spark executors.
#
#   scripts/make_dist.sh [DIST_DIR]          (default: dist/)
#
# Produces, in DIST_DIR:
#   raims-<version>-py3-none-any.whl   the package, with data/schemas as package data
#                                      (spark_app/data/schemas inside the wheel)
#   raims-env.tar.gz                   a venv-pack archive of a virtual environment with
#                                      the wheel and what executors import, for
#                                      spark-submit --archives raims-env.tar.gz#environment
#                                      --conf spark.pyspark.python=./environment/bin/python
#
# Why venv-pack: the project is pip-only (no conda on the hosts, and conda-pack needs a
# conda environment), and Spark's documented --archives path takes a packed venv as is;
# a PEX would need PEX_ROOT handling on every worker and a second entry-point mechanism
# for ms_server. The price: a venv does not carry its interpreter, so every executor host
# needs the same CPython minor version at the path this venv was made from (printed below).
#
# Settings (environment): PYTHON (interpreter for the environment; default the repo's
# .venv python, whose base interpreter the venv links to), RAIMS_DIST_EXTRAS (extras
# installed into the environment; default "clients": pandas and pyarrow are added for the
# Arrow UDFs; pyspark is left out, the cluster's Spark puts its own on the workers' path).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIST=$(mkdir -p "${1:-$ROOT/dist}" && cd "${1:-$ROOT/dist}" && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
EXTRAS=${RAIMS_DIST_EXTRAS-clients}
EXECUTOR_PACKAGES=("pandas==2.3.3" "pyarrow==22.0.0" "deltalake==1.6.6")  # the audits read the lake on executors
VENV_PACK="venv-pack==0.2.0"
ARCHIVE=raims-env.tar.gz

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/raims-dist.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

echo "== staging sources in $STAGE"
mkdir -p "$STAGE/src"
cp -r "$ROOT/raims_node" "$ROOT/spark_app" "$ROOT/pyproject.toml" "$ROOT/README.md" "$STAGE/src/"
mkdir -p "$STAGE/src/spark_app/data"
cp -r "$ROOT/data/schemas" "$STAGE/src/spark_app/data/schemas"
find "$STAGE/src" -name __pycache__ -prune -exec rm -rf {} +
# the wheel stays portable (py3-none-any: any CPython >= 3.11 on the hosts, a Databricks
# runtime's too): setup.py, which declares the compiled modules, is not staged, and
# executors run their pure-Python fallbacks; an install from the source tree builds them
find "$STAGE/src" -name '*.so' -delete
# the schemas live outside the packages in the repository; in the wheel they are
# package data of spark_app, which setuptools takes from MANIFEST.in
printf 'recursive-include spark_app/data *.json\n' >"$STAGE/src/MANIFEST.in"

echo "== building the wheel"
rm -f "$DIST"/raims-*.whl
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$DIST" "$STAGE/src"
WHEEL=$(ls "$DIST"/raims-*.whl)
echo "   $WHEEL"

echo "== building the executor environment"
"$PYTHON" -m venv "$STAGE/env"
"$STAGE/env/bin/python" -m pip install --quiet --upgrade pip
SPEC="$WHEEL"
if [ -n "$EXTRAS" ]; then SPEC="raims[$EXTRAS] @ file://$WHEEL"; fi
"$STAGE/env/bin/python" -m pip install --quiet "$SPEC" "${EXECUTOR_PACKAGES[@]}"
"$STAGE/env/bin/ms_server" --version

"$PYTHON" -m venv "$STAGE/tools"
"$STAGE/tools/bin/python" -m pip install --quiet "$VENV_PACK"
rm -f "$DIST/$ARCHIVE"
"$STAGE/tools/bin/venv-pack" --quiet -p "$STAGE/env" -o "$DIST/$ARCHIVE"
BASE=$("$STAGE/env/bin/python" -c 'import os, sys; print(os.path.realpath(sys._base_executable))')
echo "   $DIST/$ARCHIVE ($(du -h "$DIST/$ARCHIVE" | cut -f1)); executors need $BASE"
