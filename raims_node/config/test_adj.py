"""`ms_test_adj`: one configuration file that runs, on one host, the network described by
graph text (manual: "Single File Configuration"; the graph format is `linkstate.graph`).

    ms_test_adj -l graph.txt > graph.yaml

writes a service with one signed user per node (`gen_key.new_network_config`), one
transport per link line named as in the graph (`tcp_link_ab` -> transport `link_ab`,
its type and costs), and at the bottom, as comments, the command that starts each node:

    # ms_server -d graph.yaml -u A -t link_ab.listen link_ac.listen

Decisions where the manual is vague:
- Every transport listens on and connects to 127.0.0.1 at a port that was free when the
  file was written, below the kernel's ephemeral range (`free_ports`), so the file runs
  as is; `-l` (the manual's "resolve the links over the loopback interface") is
  therefore accepted and changes nothing. A pgm line gets a UDP port and its own
  multicast group 239.192.x.y, since the manual notes pgm needs a multicast-capable
  interface.
- The member of a link that comes first on the node line listens and the others
  connect; the commands follow the node line, so started in order each listener is up
  before its connectors. Within a command the transports are sorted by name, which
  prints the manual's example exactly.
- The commands name the output file: `-o FILE`, otherwise the graph file with the
  suffix `.yaml` (graph.txt -> graph.yaml), or graph.yaml when reading stdin.
- The service is `test` unless `-s` names another.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import socket
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

from raims_node.config.errors import ConfigError
from raims_node.config.gen_key import new_network_config, write_private
from raims_node.config.tree import dump_yaml
from raims_node.linkstate import DEFAULT_COST, Graph, GraphError, GraphLink, parse_graph

LOOPBACK = "127.0.0.1"
DEFAULT_SERVICE = "test"
DEFAULT_OUTPUT = "graph.yaml"
PGM_GROUP_PREFIX = "239.192"
FIRST_PORT = 10000  # chosen ports start here: below it lie well-known services
PORT_TRIES = 1000
MAX_PGM_GROUPS = 0xFFFF - 1


def ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int | None:
    """The first port the kernel hands out to bind(0) and connect(); None when unknown."""
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def free_ports(count: int, kind: socket.SocketKind) -> list[int]:
    """`count` distinct ports free on the loopback interface right now, below the
    kernel's ephemeral range where it is known: a released ephemeral port can be taken
    by any client's connect() before the node binds it (seen in CI: "address already in
    use"), a port below the range only by an explicit bind. Random candidates, at most
    PORT_TRIES of them; what they do not find, bind(0) does."""
    low = ephemeral_low()
    with ExitStack() as stack:
        ports: list[int] = []

        def take(port: int) -> None:
            sock = stack.enter_context(socket.socket(socket.AF_INET, kind))
            sock.bind((LOOPBACK, port))  # held open until all are chosen, so none repeats
            ports.append(sock.getsockname()[1])

        if low is not None and low > FIRST_PORT:
            for port in random.sample(range(FIRST_PORT, low), min(PORT_TRIES, low - FIRST_PORT)):
                if len(ports) == count:
                    break
                with contextlib.suppress(OSError):
                    take(port)
        while len(ports) < count:
            take(0)
        return ports


def free_port(kind: socket.SocketKind = socket.SOCK_STREAM) -> int:
    """One port as `free_ports` chooses them, for a server a test or bench starts."""
    return free_ports(1, kind)[0]


def listener(graph: Graph, link: GraphLink) -> str:
    return min(link.nodes, key=graph.nodes.index)


def pgm_group(index: int) -> str:
    """The multicast group of the index-th pgm link: 239.192.0.1, 239.192.0.2, ..."""
    if not 0 <= index < MAX_PGM_GROUPS:
        raise GraphError(f"pgm link {index + 1} exceeds the {MAX_PGM_GROUPS} multicast groups")
    return f"{PGM_GROUP_PREFIX}.{(index + 1) >> 8}.{(index + 1) & 0xFF}"


def transport(link: GraphLink, port: int, group: str | None = None) -> dict[str, Any]:
    """The transport record of one link line; `group` is the multicast group of a pgm."""
    address = LOOPBACK if group is None else f";{group}"
    route: dict[str, Any] = {"listen": address, "connect": address, "port": port}
    if len(set(link.cost)) > 1:
        route["cost"] = list(link.cost)
    elif link.cost[0] != DEFAULT_COST:
        route["cost"] = link.cost[0]
    return {"tport": link.name, "type": link.type, "route": route}


def network_config(graph: Graph, service: str) -> dict[str, Any]:
    """The single-file configuration tree: keys, users and one transport per link."""
    tree = new_network_config(service, list(graph.nodes))
    pgm = [gl.name for gl in graph.links if gl.type == "pgm"]
    streams = [gl.name for gl in graph.links if gl.type != "pgm"]
    port = dict(zip(streams, free_ports(len(streams), socket.SOCK_STREAM), strict=True))
    port.update(zip(pgm, free_ports(len(pgm), socket.SOCK_DGRAM), strict=True))
    group = {name: pgm_group(i) for i, name in enumerate(pgm)}
    tree["transports"] = [transport(gl, port[gl.name], group.get(gl.name)) for gl in graph.links]
    return tree


def commands(graph: Graph, config_file: str) -> list[str]:
    """One `ms_server` command per node, in node line order."""
    out = []
    for node in graph.nodes:
        ends = sorted(
            f"{gl.name}.{'listen' if listener(graph, gl) == node else 'connect'}"
            for gl in graph.links
            if node in gl.nodes
        )
        cmd = f"ms_server -d {config_file} -u {node}"
        out.append(f"{cmd} -t {' '.join(ends)}" if ends else cmd)
    return out


def render(graph: Graph, service: str, config_file: str) -> str:
    lines = ["", "# start each node, in this order (listeners before their connectors):"]
    lines += [f"# {cmd}" for cmd in commands(graph, config_file)]
    return dump_yaml(network_config(graph, service)) + "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ms_test_adj",
        description="Write a configuration that runs the network of a graph file on 127.0.0.1.",
    )
    p.add_argument("graph", help="graph text file, '-' for stdin")
    p.add_argument("-l", dest="loopback", action="store_true",
                   help="resolve the links over the loopback interface (always done)")
    p.add_argument("-s", dest="service", default=DEFAULT_SERVICE, help="service name (default: test)")
    p.add_argument("-o", dest="output", metavar="FILE", help="write the configuration to FILE, not stdout")
    return p


def run(argv: Sequence[str], out: TextIO, err: TextIO, stdin: TextIO) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.graph == "-":
            text, config_file = stdin.read(), DEFAULT_OUTPUT
        else:
            text = Path(args.graph).read_text(encoding="utf-8")
            config_file = str(Path(args.graph).with_suffix(".yaml"))
        if args.output:
            config_file = args.output
        result = render(parse_graph(text), args.service, config_file)
        if args.output:
            try:
                write_private(Path(args.output), result)
            except OSError as exc:  # named as given, not its staging file
                raise OSError(exc.errno, exc.strerror, args.output) from None
        else:
            out.write(result)
    except OSError as exc:  # the graph, or the -o file: its name and the OS reason, once
        err.write(f"ms_test_adj: {exc.filename or args.graph}: {exc.strerror or exc}\n")
        return 1
    except (GraphError, ConfigError) as exc:
        err.write(f"ms_test_adj: {args.graph}: {exc}\n")
        return 1
    except UnicodeDecodeError as exc:
        err.write(f"ms_test_adj: {args.graph}: not UTF-8 text (byte {exc.start})\n")
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv, sys.stdout, sys.stderr, sys.stdin)


if __name__ == "__main__":
    sys.exit(main())
