"""One operator's console session: the commands that act on the network, and the
messages and replies that arrive for it (manual, "Console": ping, tping, mping, remote,
connect, listen, shutdown, network, configure, save, sub/psub/gsub and their unsubs,
snap, pub, trace, ack, rpc, any, cancel, mute, unmute, reseed, debug, wevents, die, quit).

The same session serves `ms_server -c` (stdin or a terminal), a telnet connection and
tests: it is given a `ConsoleHost` (the daemon) and a `write` function for its output,
and runs one line at a time with `run(line)`. Show commands are the command table's
(commands.py); everything is rendered from rows, text here, JSON elsewhere.

Decisions where the manual is vague:
- `ping`, `tping` and `mping` ask every peer at once and wait for the replies they
  expect (one per peer asked; for `mping` one per peer known) for at most REPLY_WAIT_S
  in all, then show a row per reply, and
  the peers that did not answer with an empty latency; `cancel` ends the wait at once.
- `sub S F` appends each message to file F as a line `subject: payload` instead of
  printing it; `unsub S F` stops it.
- `rpc`, `snap`: the reply subject is a fresh `_INBOX.console.<n>` subscribed by the
  session; the first reply (within REPLY_WAIT_S) is shown and the inbox dropped.
- `configure transport T K V ...` sets route fields of transport T (a new one needs
  `type`); `configure transport T` alone enters the manual's sub-mode, a `field value`
  per line (`show` prints the record so far) until `exit`, `quit` or `q` applies them;
  `configure parameter P V` sets a parameter; both act on the running
  configuration, which `save` writes to the config directory (`show running` shows it).
- `die [I]` exits the process at once with status I (default 1), no BYE.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from raims_node.config.tree import dump_yaml
from raims_node.console.commands import COMMANDS, execute
from raims_node.console.context import ConsoleContext
from raims_node.console.errors import ConsoleError
from raims_node.console.names import Names, tport_label
from raims_node.console.render import render_text
from raims_node.console.result import CommandResult, Kind, Row
from raims_node.console.table import Command, resolve
from raims_node.router.actions import Deliver
from raims_node.router.node import Node
from raims_node.router.state import OPT_ACK, OPT_ANY, OPT_TRACE

REPLY_WAIT_S = 2.0
REMOTE_WAIT = "remote"  # the wait key of `remote U C` (replies are keyed by numeric tokens)
PING_COLUMNS = ["user", "cost", "lat", "tport", "peer_tport"]  # the manual's ping, tping and mping
_LAT = {"lat": Kind.DURATION}

_SESSION_VERBS = (
    "ping", "tping", "mping", "remote", "connect", "listen", "shutdown", "network", "configure transport",
    "configure parameter", "save", "sub", "unsub", "psub", "punsub", "gsub", "gunsub", "snap", "pub", "trace",
    "ack", "rpc", "any", "cancel", "show rpcs", "mute", "unmute", "reseed", "debug", "wevents", "die", "quit", "exit",
)


def command_of(words: list[str]) -> tuple[str, list[str], bool] | None:
    """The command `words` run (abbreviated or not), its arguments, and whether it is a
    session command (ping, pub, ...); None when it is no command."""
    try:
        cmd, args = resolve(COMMANDS, words)
    except ConsoleError:
        return None
    return cmd.name, args, cmd.name in _SESSION_VERBS


def session_verb(words: list[str]) -> tuple[str, list[str]] | None:
    """The session command `words` run and its arguments, or None."""
    found = command_of(words)
    return (found[0], found[1]) if found is not None and found[2] else None


# manual "debug I": a mask, or names of its bits (the last four have no bit: accepted, no mask)
DEBUG_FLAGS = {"tcp": 0x1, "pgm": 0x2, "ibx": 0x4, "transport": 0x8, "user": 0x10, "link_state": 0x20,
               "peer": 0x40, "auth": 0x80, "session": 0x100, "hb": 0x200, "sub": 0x400, "msg_recv": 0x800,
               "msg_hex": 0x1000, "telnet": 0x2000, "name": 0x4000, "repeat": 0x8000, "not_sub": 0x10000,
               "loss": 0x20000, "adj": 0x40000, "conn": 0x80000, "stats": 0x100000,
               "dist": 0, "kvpub": 0, "kvps": 0, "rv": 0}


# the loggers a debug bit turns to DEBUG (the router's protocol bits share its logger)
_DEBUG_LOGGERS = {"tcp": "raims.tcp", "conn": "raims.tcp", "pgm": "raims.pgm", "transport": "raims.daemon",
                  "session": "raims.daemon", "stats": "raims.daemon", "user": "raims.bridge",
                  "telnet": "raims.console", "name": "raims.name"}
DEBUG_ALL = sum(DEBUG_FLAGS.values())


def set_debug(mask: int) -> None:
    """`debug I`: DEBUG for the loggers of the bits set in `mask`, the others as before."""
    wanted = {_DEBUG_LOGGERS.get(flag, "raims.router") for flag, bit in DEBUG_FLAGS.items() if bit and mask & bit}
    for name in {*_DEBUG_LOGGERS.values(), "raims.router"}:
        logging.getLogger(name).setLevel(logging.DEBUG if name in wanted else logging.NOTSET)


def debug_mask(args: list[str]) -> int | str:
    """The mask `debug` args name (an integer, or flag names; bits with no flag dropped),
    or why they do not."""
    mask = 0
    for arg in args:
        try:
            mask |= int(arg, 0)
            continue
        except ValueError:
            pass
        if arg not in DEBUG_FLAGS:
            return f"debug takes a mask or flag names ({', '.join(DEBUG_FLAGS)}), got {arg!r}"
        mask |= DEBUG_FLAGS[arg]
    return mask & DEBUG_ALL if mask >= 0 else f"debug takes a mask of 0 or more, got {mask}"


class ConsoleHost(Protocol):
    """What a console session uses of the daemon that runs it."""

    @property
    def node(self) -> Node: ...

    @property
    def tree(self) -> object: ...

    def console_context(self) -> ConsoleContext: ...

    def subscribe(self, owner: object, sid: str, subject: str, queue: str | None = None) -> None: ...

    def psubscribe(self, owner: object, sid: str, pattern: str, syntax: str = "rv",
                   queue: str | None = None) -> None: ...

    def unsubscribe(self, owner: object, sid: str) -> None: ...

    def drop_owner(self, owner: object) -> None: ...

    def publish(self, subject: str, payload: bytes, reply: str | None = None, headers: bytes | None = None,
                no_echo: object | None = None, opt: int = 0) -> int: ...

    def remote(self, user: str, command: str, owner: object) -> bool: ...

    def ping(self, user: str, owner: object, trace: bool) -> int | None: ...

    def mping(self, path: int, owner: object) -> int: ...

    def cancel(self, token: int) -> None: ...

    async def start_transport(self, name: str, listen: bool) -> object: ...

    async def stop_transport(self, name: str) -> bool: ...

    async def join_network(self, service: str, network: str) -> str: ...

    def configure_transport(self, name: str, fields: Mapping[str, str]) -> None: ...

    def configure_parameter(self, name: str, value: str) -> None: ...

    def save(self) -> list[str]: ...


class _Wait:
    """Replies awaited by one ping/mping/rpc: done when `expected` arrived or cancelled."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.rows: list[Row] = []
        self.done = asyncio.Event()

    def add(self, row: Row) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.expected:
            self.done.set()


class ConsoleSession:
    def __init__(self, host: ConsoleHost, write: Callable[[str], None]) -> None:
        self.host = host
        self.write = write
        self.muted = False
        self.debug = 0
        self.quit = False
        self._files: dict[str, Path] = {}  # subscription sid -> output file
        self._subs: dict[str, str] = {}  # subscription sid -> its command, sub, psub or gsub (show rpcs)
        self._received: dict[str, int] = {}  # subscription sid -> messages delivered
        self._waits: dict[str, _Wait] = {}  # token or inbox -> the wait for its replies
        self._inbox = 0
        self.configuring: str | None = None  # the transport whose fields the lines set (sub-mode)
        self._draft: dict[str, str] = {}

    # ------------------------------------------------------------------ output in

    def on_deliver(self, d: Deliver) -> None:
        """A message for one of the session's subscriptions, or a reply it waits for."""
        wait = self._waits.get(d.sid)
        if wait is not None:
            if d.subject.startswith("ping."):
                wait.add(self._ping_row(d))
            else:
                wait.add({"subject": d.subject, "reply": d.payload.decode(errors="replace")})
            return
        if d.subject.startswith("rem."):  # `remote U C`'s answer, headed as the manual's `from lee_a1.19:`
            text = f"from {Names(self.host.node).user(d.source)}:\n{d.payload.decode(errors='replace')}"
            remote = self._waits.get(REMOTE_WAIT)
            if remote is not None:
                remote.add({"remote": text})
            else:  # came after the wait: said when it comes
                self.write(text)
            return
        if d.sid in self._subs:
            self._received[d.sid] = self._received.get(d.sid, 0) + 1
        loss = f" (lost {d.loss})" if d.loss else ""
        line = f"{d.subject}: {d.payload.decode(errors='replace')}{loss}"
        path = self._files.get(d.sid)
        if path is not None:
            try:
                with path.open("a") as f:
                    f.write(line + "\n")
                return
            except OSError as exc:  # a full disk, a permission changed: here instead, and said once
                del self._files[d.sid]
                self.write(f"{d.sid}: cannot write {str(path)!r} ({exc.strerror}): its messages come here now")
        self.write(line)

    def on_log(self, line: str) -> None:
        if not self.muted:
            self.write(line)

    def close(self) -> None:
        self.host.drop_owner(self)
        for wait in self._waits.values():
            wait.done.set()

    # ------------------------------------------------------------------ input

    def context(self) -> ConsoleContext:
        return self.host.console_context()

    async def run(self, line: str) -> None:
        """Run one command line, writing its result."""
        self._show(await self.result_of(line))

    async def result_of(self, line: str) -> CommandResult | None:
        """Run one command line; its result (None: nothing to show)."""
        words = line.split()
        if not words:
            return None
        if self.configuring is not None:
            return self._configure_line(words)
        try:
            cmd, args = resolve(COMMANDS, words)
        except ConsoleError:
            cmd, args = None, []  # execute() reports it
        if cmd is not None and cmd.name in _SESSION_VERBS:
            try:
                result = await self._session_command(cmd, cmd.bind(args))
            except (ConsoleError, ValueError, OSError, RuntimeError) as exc:
                result = CommandResult.failed(str(exc))
            except Exception as exc:  # a console command must never take the node down
                result = CommandResult.failed(f"{cmd.name} failed: {exc}")
        else:
            result = execute(self.context(), line)
        return result

    def _show(self, result: CommandResult | None) -> None:
        if result is not None:
            text = render_text(result)
            if text:
                self.write(text)

    def _configure_line(self, words: list[str]) -> CommandResult | None:
        """A line of `configure transport T`'s sub-mode: `field value`, `show`, or `exit`
        (`quit`, `q`), which applies the fields and leaves the mode."""
        name = self.configuring
        assert name is not None
        if words[0] in ("exit", "quit", "q"):
            self.configuring = None
            try:
                self.host.configure_transport(name, self._draft)
            except RuntimeError as exc:
                return CommandResult.failed(str(exc))
            return _done("configure transport", name)
        if words[0] == "show":
            old = next((t for t in getattr(self.host.tree, "transports", ()) if t.tport == name), None)
            route = {**(old.route if old else {}), **{k: int(v) if v.isdigit() else v  # as saved (operator.py)
                                                      for k, v in self._draft.items() if k != "type"}}
            kind = self._draft.get("type") or (old.type if old else None)
            return CommandResult.lines("transport", dump_yaml({"tport": name, "type": kind, "route": route}))
        if len(words) < 2:
            return CommandResult.failed(f"{words[0]} needs a value (or show, exit)")
        self._draft[words[0]] = " ".join(words[1:])
        return None

    async def _session_command(self, cmd: Command, args: list[str]) -> CommandResult | None:
        name = cmd.name
        host = self.host
        if name in ("quit", "exit"):
            self.quit = True
            return None
        if name in ("sub", "psub", "gsub"):
            subject = args[0]
            if len(args) > 1:  # the output file F: one this node cannot write is refused now
                Path(args[1]).open("a").close()
            if name == "sub":
                host.subscribe(self, subject, subject)
            else:
                host.psubscribe(self, subject, subject, "rv" if name == "psub" else "glob")
            if len(args) > 1:
                self._files[subject] = Path(args[1])
            self._subs[subject] = name
            return _done(name, subject)
        if name in ("unsub", "punsub", "gunsub"):  # without S: all of this kind (the manual)
            kind = name.replace("un", "", 1)  # the sub, psub or gsub it undoes
            sids = [args[0]] if args else [sid for sid, k in self._subs.items() if k == kind]
            if args and args[0] not in self._subs:
                return CommandResult.failed(f"{name}: {args[0]!r} is not subscribed in this console")
            for sid in sids:
                host.unsubscribe(self, sid)
                self._files.pop(sid, None)
                self._subs.pop(sid, None)
                self._received.pop(sid, None)
            return _done(name, " ".join(sids) or "nothing subscribed")
        if name == "show rpcs":
            node_rpcs = execute(self.context(), "show rpcs")
            mine: list[Row] = [{"type": kind, "arg": sid, "recv": self._received.get(sid, 0), "count": None}
                               for sid, kind in self._subs.items()]
            return CommandResult(node_rpcs.columns, mine + node_rpcs.rows)
        if name in ("pub", "trace", "ack", "any"):
            opt = {"pub": 0, "trace": OPT_TRACE, "ack": OPT_ACK, "any": OPT_ANY}[name]
            before = len(host.node.acks)
            n = host.publish(args[0], (args[1] if len(args) > 1 else "").encode(), opt=opt)
            if opt & (OPT_ACK | OPT_TRACE):
                await asyncio.sleep(min(REPLY_WAIT_S, 0.5))
                acks = list(host.node.acks)[before:]
                return CommandResult(["kind", "user", "subject", "seqno", "tport"], [
                    {"kind": k, "user": u, "subject": s, "seqno": q, "tport": t} for k, u, s, q, t, _ in acks])
            return _done(name, args[0], local=n)
        if name in ("rpc", "snap"):
            answer = await self._request(args[0], (args[1] if name == "rpc" and len(args) > 1 else "").encode())
            if name == "snap" and len(args) > 1:  # `snap S F`: the answer to file F, as `sub S F`
                with open(args[1], "a") as f:
                    f.writelines(f"{r['subject']}: {r['reply']}\n" for r in answer.rows if r["reply"] is not None)
                return _done(name, f"{sum(r['reply'] is not None for r in answer.rows)} answer to {args[1]}")
            return answer
        if name in ("ping", "tping"):
            return await self._ping(args[0] if args else None, trace=name == "tping")
        if name == "mping":
            if args and not (args[0].isdigit() and int(args[0]) < 4):
                return CommandResult.failed(f"mping takes a path 0-3, got {args[0]!r}")
            return await self._mping(int(args[0]) if args else 0)
        if name == "cancel":
            return self.cancel()
        if name == "remote":  # the answer under the command, as ping's (a late one is written when it comes)
            if not host.remote(args[0], args[1], self):
                return CommandResult.failed(f"no peer named {args[0]!r}")
            came = await self._collect(REMOTE_WAIT, _Wait(1))
            if not came:
                return CommandResult.failed(f"no answer from {args[0]} within {REPLY_WAIT_S:g} s")
            return CommandResult.lines("remote", str(came[0]["remote"]))
        if name in ("connect", "listen"):
            await host.start_transport(args[0], listen=name == "listen")
            return _done(name, args[0])
        if name == "shutdown":
            ok = await host.stop_transport(args[0])
            return _done(name, args[0]) if ok else CommandResult.failed(f"transport {args[0]!r} is not running")
        if name == "network":
            return _done(name, await host.join_network(args[0], args[1]))
        if name == "configure transport":
            if len(args) == 1:  # the manual's sub-mode: a field per line until exit
                self.configuring, self._draft = args[0], {}
                return None
            words = args[1].split()
            if len(words) % 2:
                return CommandResult.failed(f"configure transport {args[0]}: field {words[-1]!r} has no value")
            host.configure_transport(args[0], dict(zip(words[::2], words[1::2], strict=True)))
            return _done(name, args[0])
        if name == "configure parameter":
            host.configure_parameter(args[0], args[1])
            return _done(name, f"{args[0]} = {args[1]}")
        if name == "save":
            return CommandResult.lines("saved", "\n".join(host.save()) or "nothing changed")
        if name in ("mute", "unmute"):
            self.muted = name == "mute"
            return None
        if name == "reseed":
            seed = host.node.bloom.reseed()
            return _done(name, f"seed {seed}")
        if name == "debug":
            mask = debug_mask(" ".join(args).split())
            if isinstance(mask, str):
                return CommandResult.failed(mask)
            self.debug = mask
            set_debug(mask)
            return _done(name, hex(self.debug))
        if name == "wevents":
            rows = host.node.events.rows()
            with open(args[0], "w") as f:
                for row in rows:
                    f.write(json.dumps(row, default=str) + "\n")
            return _done(name, f"{len(rows)} events to {args[0]}")
        if name == "die":
            if args and not (args[0].isdigit() and int(args[0]) <= 255):
                return CommandResult.failed(f"die takes an exit status 0-255, got {args[0]!r}")
            os._exit(int(args[0]) if args else 1)
        return CommandResult.failed(f"{name} is not available in this console")

    # ------------------------------------------------------------------ replies

    async def _collect(self, key: str, wait: _Wait) -> list[Row]:
        self._waits[key] = wait
        try:
            await asyncio.wait_for(wait.done.wait(), REPLY_WAIT_S)
        except TimeoutError:
            pass
        finally:
            self._waits.pop(key, None)
        return wait.rows

    def _ping_row(self, d: Deliver) -> Row:
        """The manual's ping row: user, cost and first transport of our route to it, the
        round trip, and the transport it names in its reply."""
        node = self.host.node
        lat, _, peer_tport = d.payload.decode(errors="replace").partition(" ")
        hops = node.routes.next_hops(d.source, 0)
        return {"user": Names(node).user(d.source), "cost": node.routes.path_cost(d.source, 0) if hops else None,
                "lat": int(lat) if lat.isdigit() else None,
                "tport": tport_label(hops[0].tport_name, hops[0].tport_id) if hops else None,
                "peer_tport": peer_tport or None}

    async def _ping(self, user: str | None, trace: bool) -> CommandResult:
        host = self.host
        users = [user] if user else sorted(p.user for p in host.node.peers.values() if p.session_key)
        before = len(host.node.acks)
        rows: list[Row] = []
        waits: dict[str, tuple[int, _Wait]] = {}  # every peer pinged at once, one wait for all
        for u in users:
            token = host.ping(u, self, trace)
            if token is None:
                rows.append({"user": u, "peer_tport": "no such peer"})
            else:
                waits[u] = (token, self._waits.setdefault(str(token), _Wait(1)))
        try:
            await asyncio.wait_for(asyncio.gather(*(w.done.wait() for _, w in waits.values())), REPLY_WAIT_S)
        except TimeoutError:
            pass
        finally:
            for token, _ in waits.values():
                self._waits.pop(str(token), None)
                host.cancel(token)
        for u, (_, w) in waits.items():
            rows += w.rows or [{"user": u, "peer_tport": "no reply"}]
        if trace:  # a router on the way: its user, and the transport it names
            for kind, u, subject, _, tport, _ in list(host.node.acks)[before:]:
                if kind == "trace":
                    rows.append({"user": u, "peer_tport": f"{tport} (trace {subject})"})
        return CommandResult(PING_COLUMNS, rows, kinds=_LAT)

    async def _mping(self, path: int) -> CommandResult:
        host = self.host
        if not 0 <= path <= 3:
            return CommandResult.failed(f"mping path {path} is not 0-3")
        expected = sum(1 for p in host.node.peers.values() if p.session_key)
        token = host.mping(path, self)
        rows = await self._collect(str(token), _Wait(expected))
        host.cancel(token)
        answered = {r["user"] for r in rows}
        names = Names(host.node)  # once: it numbers every peer
        rows += [{"user": names.user(p.bridge), "peer_tport": "no reply"} for p in host.node.peers.values()
                 if p.session_key and names.user(p.bridge) not in answered]
        return CommandResult(PING_COLUMNS, rows, kinds=_LAT)

    async def _request(self, subject: str, payload: bytes) -> CommandResult:
        """rpc / snap: publish with a reply inbox and wait for the first answer. A reply
        subject travels as its client sees it, and a NATS or Redis responder's answer to
        it comes back in the subject's client namespace (`_nats.S` is answered on
        `_nats.<inbox>`): the inbox is listened to there."""
        self._inbox += 1
        namespace = getattr(self.host, "namespace_of", lambda s: "")(subject)
        inbox = f"_INBOX.console.{id(self):x}.{self._inbox}"
        self.host.subscribe(self, inbox, namespace + inbox)
        try:
            self.host.publish(subject, payload, reply=inbox)
            rows = await self._collect(inbox, _Wait(1))
        finally:
            self.host.unsubscribe(self, inbox)
        return CommandResult(["subject", "reply"], rows or [{"subject": subject, "reply": None}])

    def cancel(self) -> CommandResult:
        """What the session waits for (ping, rpc, ...), ended now; the telnet console runs
        it as it arrives, not queued behind what it cancels."""
        rows: list[Row] = [{"waiting": key, "replies": len(w.rows), "expected": w.expected}
                           for key, w in self._waits.items()]
        for w in self._waits.values():
            w.done.set()
        return CommandResult(["waiting", "replies", "expected"], rows)


def _done(command: str, what: str, **extra: int) -> CommandResult:
    row: Row = {"command": command, "target": what, **extra}
    return CommandResult(list(row), [row])
