"""Fixtures of the integration tests.

`no_node_tracebacks` (every test): after the test and its fixtures' teardown, no node
process (harness.NodeProc) logged a traceback meanwhile.

`one`: a network of one node (A) for the test, unless a module has its own.

The key-value differential tests (kv_diff.py): `servers`, a redis-server and a node with
a map for the module, and `pair`, a client on each in RESP2 and in RESP3, the data of
both reset. A module may override either: test_kv_differential runs its servers on both
RESP scans; a module's own `pair` may take this one and add to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import STARTED
from tests.integration.kv_diff import Pair, kv_servers
from tests.integration.test_bridges_net import BridgeNet, start_network


@pytest.fixture(autouse=True)
def no_node_tracebacks() -> Iterator[None]:
    yield
    found = [tb for node in STARTED if (tb := node.new_traceback()) is not None]
    STARTED[:] = [node for node in STARTED if node.proc.poll() is None]
    assert not found, "a node logged an exception:\n" + "\n\n".join(found)


@pytest.fixture
def one(tmp_path: Path) -> Iterator[BridgeNet]:
    net = start_network(tmp_path, "node A\n")
    yield net
    net.stop()


@pytest.fixture(scope="module")
def servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    with kv_servers(tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])) as ports:
        yield ports


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def pair(request: pytest.FixtureRequest, servers: tuple[int, int]) -> Iterator[Pair]:
    p = Pair(servers[0], servers[1], request.param)
    p.reset()
    yield p
    p.close()
