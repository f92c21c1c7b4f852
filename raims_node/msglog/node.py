"""A cabal node: message server and client over asyncio (seed 004 sections 1.3-1.7).

`CabalNode` owns the node's log (it is its producer), listens on its configured
addresses (server: hubs and sources; client: hubs), and carries out the `Strategy`'s
actions: connect, drop. Each connection is one `PeerLink` (asyncio.Protocol): both ends
send a hello (`wire`), then a server end runs a `Feed` and a client end logs what it
receives, exactly once by the state rule (`State.offer`): duplicates from redundant
links are counted and dropped.

Transport choice (the issue allows either): links are Unix or TCP stream sockets named
by the cabal configuration, not Rai MS inbox subjects, so a cabal runs with or without a
Rai MS network, and the ring tests run real processes on unix sockets.

A partition filter (for tests and drills) is a JSON file `{"groups": [[names], ...]}`:
a node treats every node outside its own group as unreachable, refuses its hellos and
drops its links; the file is re-read when it changes, and a missing file blocks nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, cast

from raims_node.msglog.config import Address, Cabal
from raims_node.msglog.errors import MsgLogError, ProtocolError
from raims_node.msglog.feed import Feed
from raims_node.msglog.log import FsyncPolicy, MessageLog
from raims_node.msglog.state import State
from raims_node.msglog.strategy import Connect, Direction, Drop, Link, Strategy, accepts
from raims_node.msglog.wire import KEEPALIVE, Decoder, Hello, Messages, RawSpan, encode_hello

log = logging.getLogger("raims.msglog")

TICK: Final = 0.05  # seconds between strategy polls
CONNECT_TIMEOUT: Final = 2.0
HELLO_TIMEOUT: Final = 5.0
HIGH_WATER: Final = 256 * 1024  # small: asyncio moves its whole buffer on each send
LOW_WATER: Final = 64 * 1024
DEFAULT_HEARTBEAT: Final = 1.0  # seconds of silence before a keepalive is sent
DEAD_HEARTBEATS: Final = 5  # heartbeats of silence from a peer before its link is closed
_FLIP: Final = {Direction.FEED: Direction.PULL, Direction.PULL: Direction.FEED}


class PeerLink(asyncio.Protocol):
    """One connection; `direction` is this node's side, `mine` whether it connected."""

    def __init__(self, node: CabalNode, direction: Direction, mine: bool, peer: str | None) -> None:
        self.node = node
        self.direction = direction
        self.mine = mine
        self.peer = peer
        self.id = node.next_id()
        self.up = False
        self.feed: Feed | None = None
        self.transport: asyncio.Transport | None = None
        self.decoder = Decoder(records=direction is Direction.PULL)
        self._hello_timer: asyncio.TimerHandle | None = None
        self.last_rx = self.last_tx = time.monotonic()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.transport.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)
        self.write(encode_hello(self.node.hello(self.direction)))
        self._hello_timer = asyncio.get_running_loop().call_later(HELLO_TIMEOUT, self._no_hello)
        self.node.pending.add(self)

    def _no_hello(self) -> None:
        if not self.up:
            self.close("no hello")

    def close(self, why: str) -> None:
        self.node.trace(f"link {self.id} {self.peer or '?'} {self.direction}: close ({why})")
        if self.transport is not None:
            self.transport.close()

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)
        self.last_tx = time.monotonic()

    def heartbeat(self, now: float, interval: float) -> None:
        """Keep the link alive; close it when the peer has been silent too long."""
        if now - self.last_rx > interval * DEAD_HEARTBEATS:
            self.node.counters["silent_peers"] += 1
            self.close(f"nothing heard for {now - self.last_rx:.1f} s")
        elif now - self.last_tx >= interval:
            self.write(KEEPALIVE)

    def data_received(self, data: bytes) -> None:
        self.last_rx = time.monotonic()
        try:
            events = self.decoder.feed(data)
            for ev in events:
                if isinstance(ev, Hello):
                    self._hello(ev.fields)
                elif isinstance(ev, Messages):
                    self.node.receive(ev.data, ev.spans)
        except (ProtocolError, MsgLogError, RecursionError) as exc:  # (a hello nested too deep)
            self.node.counters["protocol_errors"] += 1
            self.node.mark_dirty()
            log.warning("link %s %s: %s", self.id, self.peer or "?", exc)
            self.close(str(exc))

    def _hello(self, fields: dict[str, Any]) -> None:
        peer = self.node.check_hello(fields, self.direction, self.mine, self.peer)
        self.peer = peer
        self.up = True
        if self._hello_timer is not None:
            self._hello_timer.cancel()
        self.node.link_up(self)
        if self.direction is Direction.FEED:
            state = State.from_json(fields.get("state", {}))
            assert self.transport is not None
            self.feed = Feed(self.node.log, state, int(fields["number"]), self.write)
            self.feed.pump()

    def pause_writing(self) -> None:
        if self.feed is not None:
            self.feed.pause()

    def resume_writing(self) -> None:
        if self.feed is not None:
            self.feed.resume()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._hello_timer is not None:
            self._hello_timer.cancel()
        if self.feed is not None:
            self.feed.close()
        self.node.link_lost(self)


class CabalNode:
    def __init__(
        self,
        cabal: Cabal,
        me: str,
        message_log: MessageLog,
        *,
        block_file: Path | None = None,
        status_file: Path | None = None,
        retry: float = 1.0,
        heartbeat: float = DEFAULT_HEARTBEAT,
        trace: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cabal = cabal
        self.conf = cabal.node(me)
        if message_log.node_number != self.conf.number:
            raise MsgLogError(
                f"log {message_log.directory} is node number {message_log.node_number}, "
                f"the cabal says {me} is {self.conf.number}"
            )
        self.log = message_log
        self.strategy = Strategy(cabal, me, retry=retry)
        self.block_file = block_file
        self.status_file = status_file
        self.trace_on = trace
        self.heartbeat = heartbeat
        self.clock = clock
        self.links: dict[int, PeerLink] = {}
        self.pending: set[PeerLink] = set()
        self.servers: list[asyncio.AbstractServer] = []
        self.counters = {
            "received": 0,
            "duplicates": 0,
            "gaps": 0,
            "originated": 0,
            "protocol_errors": 0,
            "silent_peers": 0,
            "rejected": 0,
        }
        self._ids = 0
        self._block_mtime: float | None = None
        self._dirty = True
        self._task: asyncio.Task[None] | None = None
        self._connecting: set[asyncio.Task[None]] = set()

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def mark_dirty(self) -> None:
        """The status changed: rewrite the status file on the next tick."""
        self._dirty = True

    def trace(self, text: str) -> None:
        if self.trace_on:
            log.info("%s: %s", self.conf.name, text)

    # -- protocol ------------------------------------------------------------------

    def hello(self, direction: Direction) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cabal": self.cabal.name,
            "node": self.conf.name,
            "number": self.conf.number,
            "type": str(self.conf.type),
            "role": "server" if direction is Direction.FEED else "client",
        }
        if direction is Direction.PULL:
            out["state"] = self.log.state.to_json()
        return out

    def check_hello(
        self, f: dict[str, Any], direction: Direction, mine: bool, expected: str | None
    ) -> str:
        def reject(why: str) -> ProtocolError:
            self.counters["rejected"] += 1
            return ProtocolError(f"hello refused: {why}")

        if f.get("cabal") != self.cabal.name:
            raise reject(f"cabal {f.get('cabal')!r} is not {self.cabal.name!r}")
        name = f.get("node")
        if not isinstance(name, str) or name not in self.cabal.nodes:
            raise reject(f"node {name!r} is not in the cabal")
        peer = self.cabal.nodes[name]
        if f.get("number") != peer.number:
            raise reject(f"node {name} says number {f.get('number')}, the cabal says {peer.number}")
        want_role = "client" if direction is Direction.FEED else "server"
        if f.get("role") != want_role:
            raise reject(f"{name} is a {f.get('role')}, this end wants a {want_role}")
        if expected is not None and name != expected:
            raise reject(f"connected to {expected}, {name} answered")
        if name in self.strategy.blocked or name == self.conf.name:
            raise reject(f"{name} is unreachable from here")
        if not mine and not accepts(self.conf, peer, direction):
            raise reject(f"a {self.conf.type} does not take a {peer.type} as {want_role}")
        return name

    def link_up(self, link: PeerLink) -> None:
        self.pending.discard(link)
        self.links[link.id] = link
        assert link.peer is not None
        self.strategy.link_up(Link(link.id, link.peer, link.direction, link.mine))
        self.trace(
            f"link {link.id} {link.peer} {link.direction} up ({'mine' if link.mine else 'theirs'})"
        )
        self._dirty = True
        self._poll()

    def link_lost(self, link: PeerLink) -> None:
        self.pending.discard(link)
        if self.links.pop(link.id, None) is not None:
            self.strategy.link_down(link.id, self.clock())
            self.trace(f"link {link.id} {link.peer} {link.direction} down")
        elif link.mine and link.peer is not None:
            self.strategy.connect_failed(link.peer, link.direction, self.clock())
        self._dirty = True

    def receive(self, data: bytes, spans: list[RawSpan]) -> None:
        """Log what is new, exactly once (seed 1.7)."""
        ids = self.log.state.ids  # State.offer, inlined: this loop runs per message
        ahead: dict[int, int] = {}  # this batch's ids; the state moves only once they are written
        keep: list[RawSpan] = []
        for s in spans:
            origin, mid = s[0], s[1]
            last = ahead.get(origin, ids[origin])
            if mid <= last:
                continue  # Verdict.DUPLICATE
            if mid != last + 1:  # Verdict.GAP
                self.counters["gaps"] += 1
                log.warning(
                    "%s: gap before %d:%d (the server's log lacks it)", self.conf.name, origin, mid
                )
            ahead[origin] = mid
            keep.append(s)
        self.counters["duplicates"] += len(spans) - len(keep)
        if not keep:
            return
        if len(keep) == len(spans):
            raw = data
        else:
            raw = b"".join(data[s[2] : s[3]] for s in keep)
        self.log.append_records(raw, [(s[0], s[1]) for s in keep])
        self.counters["received"] += len(keep)
        self._dirty = True

    def originate(self, data: bytes) -> int:
        mid = self.log.originate(data)
        self.counters["originated"] += 1
        self._dirty = True
        return mid

    # -- running ---------------------------------------------------------------------

    async def _listen(self, addr: Address, direction: Direction) -> None:
        loop = asyncio.get_running_loop()

        def factory() -> PeerLink:
            return PeerLink(self, direction, False, None)

        if addr.scheme == "unix":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(addr.path)
            server = await loop.create_unix_server(factory, addr.path)
            shown = f"unix://{addr.path}"
        else:
            server = await loop.create_server(factory, addr.host, addr.port)
            host, port = server.sockets[0].getsockname()[:2]
            shown = f"tcp://{host}:{port}"
        self.servers.append(server)
        print(
            f"{self.conf.name}: listening on {shown} ({'server' if direction is Direction.FEED else 'client'})",
            flush=True,
        )

    async def start(self) -> None:
        if self.conf.server is not None and self.conf.type.value in ("hub", "source"):
            await self._listen(self.conf.server, Direction.FEED)
        if self.conf.client is not None and self.conf.type.value == "hub":
            await self._listen(self.conf.client, Direction.PULL)
        self._read_block_file()
        self._task = asyncio.get_running_loop().create_task(self._ticker())

    async def _ticker(self) -> None:
        while True:
            self._read_block_file()
            self._poll()
            now = time.monotonic()
            for link in list(self.links.values()):
                link.heartbeat(now, self.heartbeat)
            if self.log.fsync is FsyncPolicy.BATCH:
                self.log.sync()
            self._check_active()
            if self._dirty:
                self._write_status()
            await asyncio.sleep(TICK)

    def _check_active(self) -> None:
        """A log file deleted under the node: go on in a new one, and say so."""
        try:
            if not self.log.check_active():
                log.warning("%s: the active message file was deleted under the running log "
                            "(its messages are lost to readers); logging goes on in file %d",
                            self.log.directory, self.log.active_no)
        except OSError as exc:  # a full disk: asked again on the next tick
            log.warning("%s: cannot start a new message file: %s", self.log.directory, exc.strerror or exc)

    def _poll(self) -> None:
        for act in self.strategy.poll(self.clock()):
            if isinstance(act, Drop):
                link = self.links.get(act.link)
                if link is not None:
                    link.close(act.why)
            elif isinstance(act, Connect):
                task = asyncio.get_running_loop().create_task(self._connect(act))
                self._connecting.add(task)
                task.add_done_callback(self._connecting.discard)

    async def _connect(self, act: Connect) -> None:
        peer = self.cabal.node(act.peer)
        addr = peer.client if act.direction is Direction.FEED else peer.server
        loop = asyncio.get_running_loop()

        def factory() -> PeerLink:
            return PeerLink(self, act.direction, True, act.peer)

        try:
            if addr is None:
                raise OSError(
                    f"{act.peer} has no {'client' if act.direction is Direction.FEED else 'server'} address"
                )
            if addr.scheme == "unix":
                coro = loop.create_unix_connection(factory, addr.path)
            else:
                coro = loop.create_connection(factory, addr.host, addr.port)
            await asyncio.wait_for(coro, CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            self.trace(f"connect {act.peer} {act.direction} failed: {exc}")
            self.strategy.connect_failed(act.peer, act.direction, self.clock())

    def _read_block_file(self) -> None:
        if self.block_file is None:
            return
        try:
            mtime: float | None = self.block_file.stat().st_mtime
        except FileNotFoundError:
            mtime = None
        if mtime == self._block_mtime:
            return
        self._block_mtime = mtime
        blocked: set[str] = set()
        if mtime is not None:
            try:
                groups = json.loads(self.block_file.read_text()).get("groups", [])
            except (OSError, ValueError, AttributeError) as exc:
                log.warning(
                    "%s: partition file %s unreadable: %s", self.conf.name, self.block_file, exc
                )
                return
            mine = next((set(g) for g in groups if self.conf.name in g), None)
            if mine is not None:
                blocked = set(self.cabal.nodes) - mine
        self.strategy.set_blocked(blocked)
        for link in list(self.pending):
            if link.peer in blocked:
                link.close("partitioned")
        self.trace(f"blocked: {sorted(blocked)}")

    def status(self) -> dict[str, Any]:
        return {
            "node": self.conf.name,
            "number": self.conf.number,
            "state": self.log.state.to_json(),
            "links": sorted(
                (
                    {"peer": lk.peer, "direction": str(lk.direction), "mine": lk.mine}
                    for lk in self.links.values()
                ),
                key=lambda d: (str(d["peer"]), str(d["direction"]), bool(d["mine"])),
            ),
            "counters": dict(self.counters),
            "pid": os.getpid(),
        }

    def _write_status(self) -> None:
        self._dirty = False
        if self.status_file is None:
            return
        tmp = self.status_file.with_name(self.status_file.name + ".tmp")
        tmp.write_text(json.dumps(self.status()))
        os.replace(tmp, self.status_file)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for server in self.servers:
            server.close()
        for link in list(self.links.values()) + list(self.pending):
            link.close("stopping")
        for task in list(self._connecting):
            task.cancel()
        await asyncio.sleep(0)
        self._write_status()
