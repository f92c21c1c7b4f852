"""The telnet transport: the console over TCP (manual, "Telnet": `type: telnet`, `route:
{listen, port}`; "A telnet client signals the service that it has terminal capabilities
which enables command line editing").

`TelnetParser` is sans-IO: bytes in, data and option events out (RFC 854 commands,
RFC 855 option negotiation, subnegotiation skipped). `LineEditor` turns the data into
command lines: in line mode (a client that did not agree to anything) it splits on
newlines; once the client agrees to let the server echo (`DO ECHO`) and to suppress
go-ahead, it edits the line itself: printable characters, backspace, ^U, ^C, ^D,
up/down for history, tab to complete (console/terminal.py's completer words).

Negotiation at connect: the server offers `WILL ECHO`, `WILL SUPPRESS-GO-AHEAD` and asks
`DO TERMINAL-TYPE`; refusals leave the connection in line mode. Input is capped
(MAX_LINE per line, a longer line is refused with an error) so a client cannot grow the
server's memory. `cancel` runs as it arrives, not after the command it cancels.

Output is bounded (2026-11-27, edge-adversary), as redis-server bounds a client's
output buffer: a client that does not read its output is not read either (its socket
paused while the transport holds more than asyncio's high-water mark, and no further
command line is run until it drains); at most MAX_QUEUED_LINES lines wait to run (more
are dropped, said in one error line), each in a loop turn of its own, and none once the
client has gone (a pasted batch of 43,000 `help` lines ran on for a minute after its
client closed, holding the loop: a new telnet client waited for its greeting).
Output the client did not ask for (log lines, messages of its `sub`s) is not held
back: past MAX_UNSENT bytes unsent the connection is aborted and logged, as a slow
consumer. What one read of input answers (echo, option refusals) is written at once, in
one write: a client that sent 10 MB of `IAC DO x` and read nothing held ~100 MB in 3-byte
writes until the transport failed (writev EINVAL past 1,024 buffers, not logged).

No idle or first-line deadline (2026-11-27, half-open, decided after measuring: 100
connections that sent half a line were held, the console still answering): a console
operator may connect and think before typing, and a client in line mode (nc) sends
nothing until its first line, so a silent connection is not a broken one here. Whoever
reaches the port may run any command (`die` included), so holding a socket open gains
an attacker nothing; the listener is 127.0.0.1 unless configured otherwise. The bound
is the process's descriptor limit (bridges/capacity.py raises it at start). A console
whose host vanished (no FIN) is closed by TCP keepalive, the `tcp_keepalive` parameter
set on each accepted socket (raims_node/keepalive.py; before 2026-11-27 it was held for
ever).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

from raims_node.console.complete import completions, prompt_text
from raims_node.console.render import render_text
from raims_node.console.session import ConsoleHost, ConsoleSession, session_verb
from raims_node.keepalive import set_keepalive

log = logging.getLogger("raims.console")

IAC, DONT, DO, WONT, WILL, SB, SE = 255, 254, 253, 252, 251, 250, 240
NOP, GA, IP, EOR = 241, 249, 244, 239
ECHO, SGA, TTYPE, NAWS = 1, 3, 24, 31
MAX_LINE = 4096
HISTORY = 100
MAX_QUEUED_LINES = 1024  # command lines read and not run yet: more pauses reading
MAX_UNSENT = 8 * 1024 * 1024  # unsent output that makes the client a slow consumer (web/admin.py's too)


@dataclass(frozen=True, slots=True)
class Option:
    verb: int  # WILL / WONT / DO / DONT
    option: int


class TelnetParser:
    """RFC 854 bytes -> data (bytes) and Option events."""

    def __init__(self) -> None:
        self._state = 0  # 0 data, 1 after IAC, 2 after WILL/WONT/DO/DONT, 3 in SB, 4 IAC in SB
        self._verb = 0

    def feed(self, data: bytes) -> list[bytes | Option]:
        out: list[bytes | Option] = []
        text = bytearray()
        for b in data:
            st = self._state
            if st == 0:
                if b == IAC:
                    self._state = 1
                else:
                    text.append(b)
            elif st == 1:
                if b == IAC:
                    text.append(IAC)
                    self._state = 0
                elif b in (WILL, WONT, DO, DONT):
                    self._verb, self._state = b, 2
                elif b == SB:
                    self._state = 3
                else:
                    if b == IP:
                        text.append(3)  # interrupt process as ^C
                    self._state = 0
            elif st == 2:
                if text:
                    out.append(bytes(text))
                    text.clear()
                out.append(Option(self._verb, b))
                self._state = 0
            elif st == 3:
                if b == IAC:
                    self._state = 4
            else:
                self._state = 0 if b == SE else 3
        if text:
            out.append(bytes(text))
        return out


class LineEditor:
    """Characters -> command lines (None for a line over MAX_LINE, refused whole rather
    than run cut); `echo` is what to write back to the client."""

    def __init__(self, complete: Callable[[list[str]], Iterable[str]]) -> None:
        self.complete = complete
        self.char_mode = False
        self.buf = bytearray()
        self.history: list[str] = []
        self._hist_at = 0
        self._esc = b""
        self._last_cr = False
        self._cut = False  # the line being typed went over MAX_LINE

    def feed(self, data: bytes) -> tuple[list[str | None], bytes]:
        lines: list[str | None] = []
        echo = bytearray()
        for b in data:
            if self._esc:
                self._esc += bytes([b])
                if len(self._esc) == 3:
                    echo += self._arrow(self._esc[2:])
                    self._esc = b""
                continue
            if b in (13, 10):
                if b == 10 and self._last_cr:
                    self._last_cr = False
                    continue
                self._last_cr = b == 13
                line = self.buf.decode(errors="replace")
                self.buf.clear()
                if self.char_mode:
                    echo += b"\r\n"
                if line.strip():
                    self.history = [*self.history, line][-HISTORY:]
                self._hist_at = len(self.history)
                lines.append(None if self._cut else line)
                self._cut = False
                continue
            self._last_cr = False
            if b == 0:
                continue
            if not self.char_mode:
                if len(self.buf) < MAX_LINE:
                    self.buf.append(b)
                else:
                    self._cut = True
                continue
            if b in (8, 127):
                if self.buf:
                    self.buf.pop()
                    echo += b"\b \b"
            elif b == 21:  # ^U
                echo += b"\b \b" * len(self.buf)
                self.buf.clear()
            elif b == 3:  # ^C
                self.buf.clear()
                echo += b"^C\r\n"
                lines.append("")
            elif b == 4 and not self.buf:  # ^D on an empty line
                lines.append("quit")
            elif b == 9:
                echo += self._tab()
            elif b == 27:
                self._esc = b"\x1b"
            elif b >= 32 and len(self.buf) < MAX_LINE:
                self.buf.append(b)
                echo.append(b)
            elif b >= 32:
                self._cut = True
        return lines, bytes(echo)

    def _replace(self, text: str) -> bytes:
        erase = b"\b \b" * len(self.buf)
        self.buf = bytearray(text.encode())
        return erase + bytes(self.buf)

    def _arrow(self, key: bytes) -> bytes:
        if key == b"A" and self._hist_at > 0:
            self._hist_at -= 1
            return self._replace(self.history[self._hist_at])
        if key == b"B" and self._hist_at < len(self.history):
            self._hist_at += 1
            return self._replace(self.history[self._hist_at] if self._hist_at < len(self.history) else "")
        return b""

    def _tab(self) -> bytes:
        text = self.buf.decode(errors="replace")
        words = text.split()
        partial = "" if text.endswith(" ") or not words else words.pop()
        choices = [w for w in self.complete(words) if w.startswith(partial)]
        if len(choices) == 1:
            add = choices[0][len(partial):] + " "
            self.buf += add.encode()
            return add.encode()
        if choices:
            return ("\r\n" + "  ".join(choices) + "\r\n").encode() + bytes(self.buf)
        return b""


class TelnetProtocol(asyncio.Protocol):
    """One telnet connection: a console session with its own prompt and editor."""

    def __init__(self, host: ConsoleHost, on_log: list[Callable[[str], None]],
                 sessions: set[TelnetProtocol] | None = None, keepalive_s: float = 0.0) -> None:
        self.host = host
        self.keepalive_s = keepalive_s  # TCP keepalive idle time (`tcp_keepalive`); 0 off
        self.on_log = on_log
        self.sessions = sessions if sessions is not None else set()  # the listener's live ones (show fds)
        self.bytes_in = self.bytes_out = 0
        self.wr_peak = self.rd_peak = 0  # the most output held, the largest read (show buffers)
        self.parser = TelnetParser()
        self.editor = LineEditor(lambda words: completions(host, words))
        self.transport: asyncio.Transport | None = None
        self.session: ConsoleSession | None = None
        self.count = 0
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._busy = False  # a line is running: its end gives the prompt back
        self._task: asyncio.Task[None] | None = None
        self._writable = asyncio.Event()  # clear while the transport holds too much (pause_writing)
        self._writable.set()
        self._read_paused = False
        self.cut = False  # aborted as a slow consumer
        self.dropped = 0  # command lines past MAX_QUEUED_LINES waiting, not run
        self._asked = 0  # unsent bytes of the answers the client asked for (not held against it)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        set_keepalive(self.transport.get_extra_info("socket"), self.keepalive_s)
        self.sessions.add(self)
        self.session = ConsoleSession(self.host, self._write)
        self.on_log.append(self.session.on_log)
        self.transport.write(bytes([IAC, WILL, ECHO, IAC, WILL, SGA, IAC, DO, TTYPE]))
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.bytes_in += len(data)
        self.rd_peak = max(self.rd_peak, len(data))
        out = bytearray()  # this read's echo and option answers, written once
        for ev in self.parser.feed(data):
            if isinstance(ev, Option):
                out += self._negotiate(ev)
                continue
            lines, echo = self.editor.feed(ev)
            out += echo
            for line in lines:
                if line is not None and self.session is not None and _may_cancel(line) \
                        and session_verb(line.split()) == ("cancel", []):
                    self._flush_out(out)
                    self._write(render_text(self.session.cancel()))  # now: not behind what it cancels
                    if not self._busy and self._lines.empty():
                        self._prompt()  # nothing ran to give the prompt back
                    continue
                if self._lines.qsize() < MAX_QUEUED_LINES:
                    self._lines.put_nowait(line)
                else:
                    self.dropped += 1
        self._flush_out(out)
        if self._lines.qsize() >= MAX_QUEUED_LINES:
            self._update_reading()

    def _flush_out(self, out: bytearray) -> None:
        if out and self.transport is not None and not self.transport.is_closing():
            self.bytes_out += len(out)
            self.transport.write(bytes(out))
            self._check_unsent(len(out))
            out.clear()

    def _negotiate(self, ev: Option) -> bytes:
        if ev.verb == DO and ev.option == ECHO:
            self.editor.char_mode = True
        elif ev.verb == DONT and ev.option == ECHO:
            self.editor.char_mode = False
        elif ev.verb == DO and ev.option not in (ECHO, SGA):
            return bytes([IAC, WONT, ev.option])  # nothing else offered
        elif ev.verb == WILL and ev.option not in (TTYPE, NAWS):
            return bytes([IAC, DONT, ev.option])
        return b""

    # ------------------------------------------------------------ flow control

    def pause_writing(self) -> None:
        self._writable.clear()
        self._update_reading()

    def resume_writing(self) -> None:
        self._writable.set()
        self._update_reading()

    def _update_reading(self) -> None:
        """Read the client only while its output drains and few of its lines wait."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        waiting = self._lines.qsize()
        want = not self._writable.is_set() or waiting >= MAX_QUEUED_LINES or \
            self._read_paused and waiting > MAX_QUEUED_LINES // 2
        if want != self._read_paused:
            self._read_paused = want
            if want:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def _check_unsent(self, wrote: int) -> None:
        """Abort a client that has left MAX_UNSENT bytes unread (a slow consumer), past
        the answers to its commands (one answer may be larger: it is not run before the
        ones before it are read)."""
        transport = self.transport
        assert transport is not None
        unsent = transport.get_write_buffer_size()
        self.wr_peak = max(self.wr_peak, unsent)
        if self._busy:  # the answer of the command running
            self._asked = unsent
            return
        self._asked = min(self._asked, max(0, unsent - wrote))
        if unsent > self._asked + MAX_UNSENT and not self.cut:
            self.cut = True
            log.warning("telnet client closed: slow consumer, %d bytes unsent", unsent)
            transport.abort()

    def _write(self, text: str) -> None:
        if self.transport is not None and not self.transport.is_closing():
            out = text.replace("\r\n", "\n").replace("\n", "\r\n").encode() + b"\r\n"
            self.bytes_out += len(out)
            self.transport.write(out)
            self._check_unsent(len(out))

    def _prompt(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            mode = self.session.configuring if self.session is not None else None
            out = prompt_text(self.host, self.count, mode).encode()
            self.bytes_out += len(out)
            self.transport.write(out)

    async def _serve(self) -> None:
        assert self.session is not None
        self._prompt()
        try:
            while not self.session.quit:
                await self._writable.wait()  # a client that does not read runs nothing more
                line = await self._lines.get()
                if self.transport is None or self.transport.is_closing():
                    break  # gone: what it queued is not run
                if self._read_paused:
                    self._update_reading()
                if self.dropped:
                    self._write(f"error: {self.dropped} command lines not run: more than {MAX_QUEUED_LINES} waited")
                    self.dropped = 0
                self._busy = True
                self.count += 1
                if line is None:
                    self._write(f"error: a line over {MAX_LINE} bytes is not run")
                else:
                    await self.session.run(line.strip())
                if not self.session.quit:
                    self._prompt()
                self._busy = False
                await asyncio.sleep(0)  # a turn for the others between two queued lines
        finally:
            if self.transport is not None:
                self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.sessions.discard(self)
        if self.session is not None:
            if self.session.on_log in self.on_log:
                self.on_log.remove(self.session.on_log)
            self.session.close()
        if self._task is not None:
            self._task.cancel()


def _may_cancel(line: str) -> bool:
    """Whether `line` may be `cancel` (abbreviated): the command table is asked only then
    (resolving every line cost ~0.1 ms: 4 s for one 256 KB read of pasted lines)."""
    words = line.split(None, 2)
    return len(words) == 1 and "cancel".startswith(words[0])


async def start_telnet(host: ConsoleHost, on_log: list[Callable[[str], None]], bind: str | None,
                       port: int, sessions: set[TelnetProtocol] | None = None,
                       keepalive_s: float = 0.0) -> asyncio.Server:
    """The telnet listener; each connection is in `sessions` while it is open, with TCP
    keepalive `keepalive_s` (0 off)."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: TelnetProtocol(host, on_log, sessions, keepalive_s), bind, port)
