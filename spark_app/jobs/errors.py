"""Errors of a rollout: one root, `RolloutError`, under `spark_app.SparkAppError`.

A rollout runs on many hosts; every message names what an operator needs to look at:
the stage, the host, the node and, for a daemon, its log file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spark_app.errors import SparkAppError


class RolloutError(SparkAppError):
    """Root of every error raised by a rollout stage."""


class PlanError(RolloutError):
    """The settings or the topology cannot be turned into a deployment plan."""


class ClusterError(RolloutError):
    """The Spark cluster cannot run the rollout (executors, slots, dynamic allocation)."""


class DaemonError(RolloutError):
    """An ms_server process cannot be started or stopped; names its host and log file."""


class DeployError(RolloutError):
    """The deploy stage failed on at least one host; `started` lists the nodes that did
    start (deploy.NodeRecord), which the caller stops unless asked to keep them."""

    def __init__(self, message: str, started: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.started = list(started)


class ConvergeError(RolloutError):
    """The network did not converge in time; names the nodes that disagree."""


class TrafficError(RolloutError):
    """The traffic check lost, duplicated or could not deliver messages."""


class ValidationFailed(RolloutError):
    """Expectations failed on the rollout's snapshot (each is a row of `validations`)."""


class CollectError(RolloutError):
    """A node's admin JSON could not be read or does not fit its table."""
