"""`ms_msglog`: the message log commands (seed 004 section 3.5) and a cabal node server.

    ms_msglog create [path] cabal node number [content|state]
    ms_msglog export [path] cabal node number file
    ms_msglog prune  [path] cabal node number retention        (20d, 12h, 30m, 10s)
    ms_msglog append [path] cabal node number                  (messages from stdin, one a line)
    ms_msglog serve  [path] cabal node --config cabal.nb [--fsync batch] [--partition FILE]
                     [--status FILE] [--trace] [--create [--kind content|state]]
    ms_msglog consume [path] cabal node name [--follow] [--live]

`serve` runs the node's message server and client as its cabal configuration says
(hub, spoke, source or sink) and originates one message per line of its standard input;
SIGUSR1 toggles its trace (the seed's `node:trace`), SIGTERM stops it.
`consume` prints the messages of a log from the consumer's cursor on (`--follow` keeps
going, `--live` asks the producer for its stream). Errors print one line on stderr and
exit 1 (2 for bad usage).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import stat
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path

from raims_node.msglog import commands, config, paths
from raims_node.msglog.errors import BadArgument, LogNotFound, MsgLogError
from raims_node.msglog.log import FsyncPolicy, MessageLog, create_log
from raims_node.msglog.node import CabalNode
from raims_node.msglog.record import LogKind


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ms_msglog", description="NodeBrain-style message logs")
    sub = p.add_subparsers(dest="command", required=True)
    for name, words in (
        ("create", "[path] cabal node number [content|state]"),
        ("export", "[path] cabal node number file"),
        ("prune", "[path] cabal node number retention"),
        ("append", "[path] cabal node number"),
    ):
        sp = sub.add_parser(name, usage=f"ms_msglog {name} {words}")
        sp.add_argument("words", nargs="*")
    s = sub.add_parser("serve", usage="ms_msglog serve [path] cabal node --config FILE [options]")
    s.add_argument("words", nargs="+")
    s.add_argument("--config", required=True, help="cabal configuration (.nb rule file or YAML)")
    s.add_argument("--fsync", choices=[p.value for p in FsyncPolicy], default="batch")
    s.add_argument("--max-file-size", type=int, default=None)
    s.add_argument("--partition", type=Path, default=None, help='JSON {"groups": [[names]...]}')
    s.add_argument("--status", type=Path, default=None, help="status JSON written on changes")
    s.add_argument("--retry", type=float, default=1.0, help="seconds between attempts at a peer")
    s.add_argument(
        "--heartbeat",
        type=float,
        default=1.0,
        help="seconds of silence before a keepalive; 5 silent heartbeats close a link",
    )
    s.add_argument("--trace", action="store_true")
    s.add_argument("--create", action="store_true", help="create the log if it does not exist")
    s.add_argument(
        "--kind",
        choices=["content", "state"],
        default="content",
        help="what --create makes (state: node number 0 only)",
    )
    c = sub.add_parser(
        "consume", usage="ms_msglog consume [path] cabal node name [--follow] [--live]"
    )
    c.add_argument("words", nargs="+")
    c.add_argument("--follow", action="store_true")
    c.add_argument("--live", action="store_true")
    c.add_argument("--count", type=int, default=0, help="stop after this many messages")
    return p


LINE_LIMIT = 1 << 24  # the longest stdin line taken; a longer one comes in parts (and is refused)


async def _line_reader(loop: asyncio.AbstractEventLoop) -> Callable[[], Awaitable[bytes]]:
    """Lines of standard input: a pipe, socket or terminal through the loop; a file or
    /dev/null (which uvloop's pipe transport cannot take) read in a worker thread. A line
    longer than LINE_LIMIT comes as parts of more than LINE_LIMIT bytes without their
    newline, then its end; b"" at the end of the input."""
    mode = os.fstat(sys.stdin.fileno()).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or sys.stdin.isatty():
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

        async def from_pipe() -> bytes:
            try:
                return await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # the end: a last line without its newline
                return exc.partial
            except asyncio.LimitOverrunError as exc:  # a part of a line over the limit
                return await reader.read(exc.consumed)

        return from_pipe

    async def from_file() -> bytes:
        return await loop.run_in_executor(None, sys.stdin.buffer.readline, LINE_LIMIT + 1)

    return from_file


async def _serve(args: argparse.Namespace) -> None:
    root, rest = commands.split_path(args.words)
    if len(rest) != 2:
        raise BadArgument("usage: ms_msglog serve [path] cabal node --config FILE")
    cabal_name, node_name = rest
    cabal = config.load(cabal_name, args.config)
    conf = cabal.node(node_name)
    options: dict[str, object] = {"fsync": FsyncPolicy(args.fsync)}
    if args.max_file_size:
        options["max_file_size"] = args.max_file_size
    try:
        log = MessageLog.open(root, cabal_name, node_name, conf.number, **options)
    except LogNotFound:
        if not args.create:
            raise
        kind = LogKind.STATE if args.kind == "state" else LogKind.CONTENT
        create_log(root, cabal_name, node_name, conf.number, kind)
        log = MessageLog.open(root, cabal_name, node_name, conf.number, **options)
    if log.repaired_bytes:
        print(f"{node_name}: cut a torn last record ({log.repaired_bytes} bytes)", flush=True)
    from raims_node.msglog.producer import Producer

    producer = Producer(log)
    node = CabalNode(
        cabal,
        node_name,
        log,
        block_file=args.partition,
        status_file=args.status,
        retry=args.retry,
        heartbeat=args.heartbeat,
        trace=args.trace,
    )
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    # `node:trace` for a running server: SIGUSR1 toggles it (seed 3.4.1)
    loop.add_signal_handler(signal.SIGUSR1, lambda: print(*commands.trace(node, []), flush=True))
    await producer.start()
    await node.start()
    readline = await _line_reader(loop)
    print(f"{node_name}: ready (state {commands.fmt_state(log.state)})", flush=True)

    async def originate() -> None:
        """Each line of stdin, a message; one that cannot be (longer than the reader takes,
        or than a record holds) is refused with a line on stderr, and the next ones are
        logged (the task ended at the first, and every later line was lost unseen)."""
        in_long_line = False
        while True:
            line = await readline()
            if not line:
                return
            whole = line.endswith(b"\n")
            if in_long_line or not whole and len(line) > LINE_LIMIT:
                if not in_long_line:
                    print(f"{node_name}: a line over {LINE_LIMIT} bytes refused", file=sys.stderr, flush=True)
                in_long_line = not whole
                continue
            try:
                node.originate(line.rstrip(b"\n"))
            except MsgLogError as exc:
                print(f"{node_name}: a line of {len(line)} bytes refused: {exc}", file=sys.stderr, flush=True)

    feeder = loop.create_task(originate())
    try:
        await done.wait()
    finally:
        feeder.cancel()
        await node.stop()
        producer.close()
        log.close()


def _consume(args: argparse.Namespace) -> None:
    from raims_node.msglog.producer import Consumer

    root, rest = commands.split_path(args.words)
    if len(rest) != 3:
        raise BadArgument("usage: ms_msglog consume [path] cabal node name")
    consumer = Consumer(paths.log_dir(root, rest[0], rest[1]), rest[2])
    out = sys.stdout
    try:
        if args.live:
            asyncio.run(
                consumer.stream(
                    lambda rec: print(
                        f"{rec.origin} {rec.mid} {commands.fmt_data(rec.data)}",
                        file=out,
                        flush=True,
                    ),
                    args.count or None,
                )
            )
            print(
                f"consumed {consumer.from_packets} from packets, {consumer.from_log} from the "
                f"log, {consumer.gaps} gap(s)",
                file=sys.stderr,
            )
            return
        n = 0
        while True:
            got = consumer.poll(args.count - n if args.count else None)
            for rec in got:
                print(f"{rec.origin} {rec.mid} {commands.fmt_data(rec.data)}", file=out, flush=True)
                n += 1
            if not args.follow or (args.count and n >= args.count):
                return
            if not got:
                import time

                time.sleep(0.1)
    finally:
        if consumer.reader.resyncs:
            print(f"ms_msglog consume: cursor resynced {consumer.reader.resyncs} time(s), "
                  f"{consumer.reader.resynced_bytes} byte(s) (the log was cut back by a power loss)",
                  file=sys.stderr)
        consumer.close()


def run_loop(coro: Coroutine[object, object, None]) -> None:
    """On uvloop when it is installed (CONVENTIONS 7), else the stock loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
        return
    uvloop.run(coro)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        if args.command == "serve":
            with contextlib.suppress(KeyboardInterrupt):
                run_loop(_serve(args))
            return 0
        if args.command == "consume":
            _consume(args)
            return 0
        if args.command == "append":
            lines = commands.append(args.words, sys.stdin.buffer)
        else:
            lines = commands.COMMANDS[args.command](args.words)
    except (MsgLogError, OSError) as exc:
        print(f"ms_msglog {args.command}: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
