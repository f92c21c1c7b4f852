"""The traffic check: Spark tasks publish through their host's daemons and tasks on the
other hosts receive, each message exactly once.

Issue "The main job", item 5 (a pipeline-stage smoke test); DESIGN.md "Pipeline stages
... publish and subscribe through the daemon on their own host". One barrier stage, a
task per host, for every node on the task's machine:
1. a client connects to the node (its NATS bridge with nats-py; the admin websocket when
   the rollout has no NATS bridge) and subscribes to the subject of every node of the
   other hosts: `raims.check.<run>.<publisher>`;
2. all tasks wait for each other (allGather), then each publisher waits until its node's
   `show match` names every node expecting its messages (their bloom filters arrived:
   what routing decides by), and publishes MESSAGES messages `<publisher>:<seq>`;
3. each subscriber collects until it has every expected message or the time is up;
4. with `TrafficSettings.target`, each task then reads its nodes' snapshot rows and
   writes them as lake parts (collect.stage_reads: only their metadata reaches the
   driver), and
   every task waits for all the others (allGather) before its clients close, so the
   snapshot holds the check's subscriptions, one seqno per node (and the filters
   and filter copies that carry them): collected after the check, a node subscribes
   nothing and the bloom audit has nothing to check.
Counts per (subscriber, publisher) go to the driver, which fails the check on a missing,
repeated or unexpected message.

Decisions: "other hosts" are other host slots (executors); with a single host every
node receives from every other node, so the check still crosses the network. Inside the
node a NATS subject `s` is `_nats.s` (raims_node.bridges.router_bus), which is what
`show match` is asked about.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from pyspark import BarrierTaskContext

from spark_app.jobs import admin
from spark_app.jobs.collect import read_node, stage_reads, task_tag
from spark_app.jobs.deploy import NodeRecord
from spark_app.jobs.errors import CollectError, TrafficError
from spark_app.jobs.hosts import TaskHost, gather, run_per_host
from spark_app.parts import Target

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SUBJECT_ROOT: Final = "raims.check"
NATS_SERVICE_PREFIX: Final = "_nats."
VIA_NATS: Final = "nats"
VIA_WEBSOCKET: Final = "websocket"
CONNECT_TIMEOUT_S: Final = 5.0
POLL_S: Final = 0.1
SETTLE_S: Final = 0.3  # after the last expected message, for late repeats to show
MAX_LISTED: Final = 5


def subject(run: str, publisher: str) -> str:
    return f"{SUBJECT_ROOT}.{run}.{publisher}"


def senders_of(nodes: Sequence[NodeRecord]) -> dict[str, list[str]]:
    """Subscriber -> the publishers it must hear from: the nodes of the other host slots
    (every other node when the rollout has one host)."""
    slots = {n.slot for n in nodes}
    return {
        n.node: sorted(p.node for p in nodes if p.node != n.node and (len(slots) == 1 or p.slot != n.slot))
        for n in nodes
    }


class _Client(Protocol):
    received: list[tuple[str, str]]  # (subject, payload) in arrival order

    async def subscribe(self, subjects: Sequence[str]) -> None: ...

    async def publish(self, subject: str, payload: str) -> None: ...

    async def close(self) -> None: ...


class _NatsClient:
    def __init__(self, url: str) -> None:
        self.url = url
        self.received: list[tuple[str, str]] = []
        self.nc: Any = None

    async def open(self) -> _NatsClient:
        import nats

        # max_reconnect_attempts=0 is "for ever" to nats-py's first connect (a node killed
        # after converging held the stage past its timeout); one try, bounded as a whole
        try:
            self.nc = await asyncio.wait_for(nats.connect(
                self.url, connect_timeout=CONNECT_TIMEOUT_S, allow_reconnect=False, max_reconnect_attempts=1),
                2 * CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, nats.errors.Error) as exc:
            raise TrafficError(f"cannot connect to NATS at {self.url}: {type(exc).__name__} {exc}".rstrip()) from None
        return self

    async def _on_msg(self, msg: Any) -> None:
        self.received.append((msg.subject, msg.data.decode()))

    async def subscribe(self, subjects: Sequence[str]) -> None:
        for s in subjects:
            await self.nc.subscribe(s, cb=self._on_msg)
        await self.nc.flush()

    async def publish(self, subject: str, payload: str) -> None:
        await self.nc.publish(subject, payload.encode())
        await self.nc.flush()

    async def close(self) -> None:
        await self.nc.close()


class _WebSocketClient:
    """The admin transport's websocket (raims_node.web.admin): every request is answered
    with {"ok": true} before the next is sent; messages may arrive in between."""

    def __init__(self, addr: str) -> None:
        self.addr = addr
        self.received: list[tuple[str, str]] = []
        self._acks: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def open(self) -> _WebSocketClient:
        import aiohttp

        self.http = aiohttp.ClientSession()
        try:
            self.ws = await asyncio.wait_for(self.http.ws_connect(f"http://{self.addr}/ws"), CONNECT_TIMEOUT_S)
        except BaseException:
            await self.http.close()  # a node that does not answer must not leave the session open
            raise
        self.reader = asyncio.ensure_future(self._read())
        return self

    async def _read(self) -> None:
        async for msg in self.ws:
            body = json.loads(msg.data)
            if "subject" in body:
                self.received.append((body["subject"], body["data"]))
            else:
                await self._acks.put(body)

    async def _request(self, body: dict[str, str]) -> None:
        await self.ws.send_json(body)
        ack = await asyncio.wait_for(self._acks.get(), CONNECT_TIMEOUT_S)
        if not ack.get("ok"):
            raise TrafficError(f"websocket {self.addr}: {body} answered {ack}")

    async def subscribe(self, subjects: Sequence[str]) -> None:
        for s in subjects:
            await self._request({"sub": s})

    async def publish(self, subject: str, payload: str) -> None:
        await self._request({"pub": subject, "data": payload})

    async def close(self) -> None:
        await self.ws.close()
        self.reader.cancel()
        await self.http.close()


async def _connect(node: NodeRecord, via: str) -> _Client:
    """A client of `node`; a failure names the node (a stopped or killed daemon's port
    alone left the operator to map it back)."""
    try:
        if via == VIA_NATS:
            return await _NatsClient(f"nats://{node.bridge(VIA_NATS)}").open()
        return await _WebSocketClient(node.admin).open()
    except (TrafficError, OSError, TimeoutError) as exc:
        raise TrafficError(f"node {node.node} (pid {node.pid}): {type(exc).__name__}: {exc}".rstrip(": ")) from None


def _wait_interest(node: NodeRecord, routed_subject: str, wanted: set[str], deadline: float) -> None:
    """Until the node's bloom filters route `routed_subject` to every node in `wanted`."""
    got: set[str] = set()
    while True:
        try:
            got = {r["user"].rpartition(".")[0] for r in admin.show(node.admin, f"show match {routed_subject}")}
        except CollectError:
            got = set()
        if wanted <= got:
            return
        if time.monotonic() > deadline:
            raise TrafficError(f"{node.node}: after the subscriptions, {routed_subject} is routed to "
                               f"{sorted(got)}, not to {sorted(wanted - got)}")
        time.sleep(POLL_S)


@dataclass(frozen=True)
class TrafficSettings:
    run: str
    via: str
    messages: int
    timeout_s: float
    # read each node's snapshot rows (collect.read_node) once the messages are in, while
    # the check's subscriptions are live (the subs and blooms tables then hold them), and
    # write them as parts of the lake's tables for this target
    target: Target | None = None
    observers: frozenset[str] | None = None  # with a target: the nodes that read the views (None: all)

    @property
    def collect(self) -> bool:
        return self.target is not None


async def _check(host: TaskHost, ctx: BarrierTaskContext, nodes: Sequence[NodeRecord],
                 settings: TrafficSettings) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + settings.timeout_s
    mine = host.share([n for n in nodes if n.machine == host.machine])
    senders = senders_of(nodes)
    listeners = {p: [s for s, froms in senders.items() if p in froms] for p in senders}
    prefix = NATS_SERVICE_PREFIX if settings.via == VIA_NATS else ""
    clients: dict[str, _Client] = {}
    reads: dict[str, Any] = {}
    staged: dict[str, Any] = {}
    error = None
    try:
        for n in mine:
            clients[n.node] = await _connect(n, settings.via)
            await clients[n.node].subscribe([subject(settings.run, p) for p in senders[n.node]])
    except Exception as exc:  # every task must reach the allGather below, failed or not
        error = f"host {host.machine}: {type(exc).__name__}: {exc}"
    errors = [e for e in await loop.run_in_executor(None, gather, ctx, error) if e]
    sent = 0
    try:
        for n in mine if not errors else []:
            topic = subject(settings.run, n.node)
            await loop.run_in_executor(None, _wait_interest, n, prefix + topic, set(listeners[n.node]), deadline)
            for seq in range(settings.messages):
                await clients[n.node].publish(topic, f"{n.node}:{seq}")
                sent += 1
        while not errors and time.monotonic() < deadline and any(
                len(clients[n.node].received) < settings.messages * len(senders[n.node]) for n in mine):
            await asyncio.sleep(POLL_S)
        await asyncio.sleep(SETTLE_S)
        for n in mine if settings.collect and not errors else []:
            observer = settings.observers is None or n.node in settings.observers
            reads[n.node] = await loop.run_in_executor(None, read_node, n, observer)
        if settings.target is not None and not errors:
            staged = await loop.run_in_executor(None, stage_reads, reads, settings.target, task_tag(host, ctx))
    except Exception as exc:  # reported with the counts, like every other failure of the check
        errors.append(f"host {host.machine}: {type(exc).__name__}: {exc}")
    finally:
        if settings.collect:
            # no task drops its subscriptions (new sub seqnos, emptier filters) before
            # every node was read: a snapshot whose owners and observers were read at
            # different seqnos shows future seqnos and stale filter copies that are not faults
            await loop.run_in_executor(None, gather, ctx, None)
        for c in clients.values():
            await c.close()
    return {"sent": sent, "errors": errors, "staged": staged,
            "received": {name: [payload for _, payload in c.received] for name, c in clients.items()}}


@dataclass(frozen=True)
class TrafficResult:
    via: str
    sent: int
    expected: int
    received: int
    per_node: Mapping[str, int]  # subscriber -> messages received
    # with settings.target: each task's stage_reads() (parts and nodes), else empty
    staged: Sequence[Mapping[str, Any]] = ()


def tally(received: Mapping[str, Sequence[str]], senders: Mapping[str, Sequence[str]],
          messages: int) -> list[str]:
    """Problems with what each subscriber received: missing, repeated or unexpected."""
    problems = []
    for node, froms in sorted(senders.items()):
        counts = Counter(received.get(node, ()))
        want = {f"{p}:{seq}" for p in froms for seq in range(messages)}
        missing = sorted(want - counts.keys())
        repeated = sorted(m for m, c in counts.items() if c > 1)
        unexpected = sorted(counts.keys() - want)
        for what, items in (("missing", missing), ("repeated", repeated), ("unexpected", unexpected)):
            if items:
                problems.append(f"{node}: {len(items)} {what} ({', '.join(items[:MAX_LISTED])})")
    return problems


def traffic(spark: SparkSession, nodes: Sequence[NodeRecord], hosts: int,
            settings: TrafficSettings) -> TrafficResult:
    """Run the traffic check; TrafficError when a message is lost, repeated or misrouted."""

    def task(host: TaskHost, ctx: BarrierTaskContext, _: list[Any]) -> Iterator[dict[str, Any]]:
        yield asyncio.run(_check(host, ctx, nodes, settings))

    results = run_per_host(spark, [[] for _ in range(hosts)], task)
    received: dict[str, list[str]] = {}
    for r in results:
        received.update(r["received"])
    senders = senders_of(nodes)
    problems = sorted({e for r in results for e in r["errors"]}) + tally(received, senders, settings.messages)
    if problems:
        raise TrafficError("traffic check failed:\n  " + "\n  ".join(problems))
    return TrafficResult(settings.via, sum(r["sent"] for r in results),
                         settings.messages * sum(len(f) for f in senders.values()),
                         sum(len(v) for v in received.values()),
                         {k: len(v) for k, v in sorted(received.items())},
                         tuple(r["staged"] for r in results if r["staged"]))
