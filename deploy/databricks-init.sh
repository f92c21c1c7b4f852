#!/bin/bash
# Databricks cluster init script: install the raims wheel on every node of the cluster.
#
# Cluster environment variables (spark_env_vars of deploy/databricks-job.json):
#   RAIMS_WHEEL       path of the wheel, e.g. /Volumes/main/raims/dist/raims-0.1.0-py3-none-any.whl
#   RAIMS_MESH_PORTS  mesh ports FIRST:LAST; the rollout config's mesh port is FIRST and
#                     node i of the node line listens on FIRST + i (rollout-databricks.yaml)
#   RAIMS_ALLOW_CIDR  optional: the cluster's private subnet; when set and iptables exists,
#                     the mesh ports are accepted from it and dropped from anywhere else
# It starts no process and opens no port: the daemons are started by the rollout job.
# Web, NATS and Redis listeners are on 127.0.0.1 only (the rollout's choice), so the mesh
# ports are the only ones other hosts need.
set -euo pipefail

PIP=/databricks/python/bin/pip
if [ ! -x "$PIP" ]; then PIP="python3 -m pip"; fi

: "${RAIMS_WHEEL:?set RAIMS_WHEEL (cluster environment) to the raims wheel path}"
if [ ! -f "$RAIMS_WHEEL" ]; then
  echo "raims init: wheel $RAIMS_WHEEL not found" >&2
  exit 1
fi
# The wheel pins exact versions (its metadata is the lock of local runs); on a cluster the
# runtime's pyspark, pandas, pyarrow, numpy and scipy must stay, so the wheel goes in
# without its dependencies and what the stages import comes in by compatible ranges:
# the daemons (cryptography, mmh3, PyYAML, aiohttp, uvloop), the traffic check's clients
# (nats-py, redis), the lake (deltalake) and the validate stage (great-expectations; the
# rollout skips that stage, saying so, when it is missing).
DEPS=(
  "cryptography>=42" "mmh3>=4,<6" "PyYAML>=6,<7" "aiohttp>=3.9,<4" "uvloop>=0.19"
  "nats-py>=2.6,<3" "redis>=5,<9" "deltalake>=1.2,<2" "great-expectations>=1.3,<2"
)
# $PIP is one or two words on purpose
# shellcheck disable=SC2086
$PIP install --quiet --disable-pip-version-check --no-deps "$RAIMS_WHEEL"
# shellcheck disable=SC2086
$PIP install --quiet --disable-pip-version-check "${DEPS[@]}"

ports=${RAIMS_MESH_PORTS:-}
if [ -n "${RAIMS_ALLOW_CIDR:-}" ] && [ -n "$ports" ] && command -v iptables >/dev/null 2>&1; then
  iptables -N RAIMS 2>/dev/null || iptables -F RAIMS
  iptables -A RAIMS -p tcp -s "$RAIMS_ALLOW_CIDR" --dport "$ports" -j ACCEPT
  iptables -A RAIMS -p tcp --dport "$ports" -j DROP
  iptables -C INPUT -j RAIMS 2>/dev/null || iptables -I INPUT -j RAIMS
  echo "raims init: mesh ports $ports accepted from $RAIMS_ALLOW_CIDR only"
fi
echo "raims init: installed $(basename "$RAIMS_WHEEL")"
