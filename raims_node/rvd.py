"""`rvd`: ms_server in rvd compatibility mode (issue 25 point 2; manual "rvd Compatibility").

    rvd [-listen [HOST:]PORT] [-http PORT | -no-http] [-cfg FILE] [-user USER[.SVC]]
        [-reliability SECS] [-no-permanent] [-no-mcast] [-foreground] [-console]
        [-log FILE] [-log-rotate BYTES] [-log-max-rotations N]

Started as `rvd` (the console script `rvd`, server.rvd_main, or ms_server linked or copied under that name),
or as ms_server with any of these arguments, the node runs an RV transport (`type:
rv`, named `rvd`) on 7500 and the web service on 7580 (`-http`, default the listen
port + 80). The client side is rvd's; between daemons it is Rai MS.

Decisions where the manual is vague:
- `-cfg` defaults to `rv.yaml` in the directory of the program as invoked (the
  manual: "the directory that ms_server is installed"); `ms_gen_key -s rvd -o rv.yaml`
  writes one. Without the file the node runs with a service key made for this run (it
  can serve clients but authenticates with no other daemon) and says so.
- The node's user is `-user`, else `<host name>_<port>` (manual "The Peer Names").
- `-listen` takes a port, `HOST:PORT` or `tcp:PORT`; without a host the RV listener
  is on every interface, as rvd's; the web service follows `web` transport rules.
- Once listening it prints the manual's `rvd running at ADDR` and `web running at
  ADDR` lines. Unless `-foreground` or `-console`, the process detaches; the command
  returns once the daemon is listening (printing "moving to background daemon" and the
  daemon's pid), or with its error and exit code 3 when it cannot (the manual: a port
  in use, "it will fail to start and exit"). SIGHUP ends it (rvd's), SIGTERM as
  ms_server. `-no-permanent` ends it when its last RV client has gone.
- `-reliability` sets the `reliability` parameter; `-log-rotate` and
  `-log-max-rotations` rotate the `-log` file by size.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import shutil
import socket
from pathlib import Path
from typing import Any

from raims_node.config.errors import ConfigError
from raims_node.config.tree import ConfigTree, from_dict, load

DEFAULT_PORT = 7500
HTTP_OFFSET = 80
RV_TPORT = "rvd"
WEB_TPORT = "web"
CONFIG_NAME = "rv.yaml"
# The arguments that select rvd mode when ms_server sees one of them (manual's list).
RVD_FLAGS = frozenset(("-cfg", "-reliability", "-user", "-log", "-log-rotate", "-log-max-rotations",
                       "-no-permanent", "-foreground", "-listen", "-no-http", "-http", "-no-mcast", "-console",
                       "-help"))

log = logging.getLogger("raims.server")


def wants_rvd(prog: str, argv: list[str]) -> bool:
    """Whether to run in rvd mode: invoked as `rvd`, or with an rvd argument."""
    return Path(prog).name == "rvd" or any(a in RVD_FLAGS for a in argv)


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="rvd", allow_abbrev=False, add_help=False,
                                 description="Rai MS node in rvd compatibility mode")
    ap.add_argument("-cfg", default=None, help="config file (default: <program dir>/rv.yaml)")
    ap.add_argument("-reliability", type=int, default=None, help="seconds of reliability (default: 15)")
    ap.add_argument("-user", default=None, help="user name (default: hostname_port)")
    ap.add_argument("-log", default=None, help="log file")
    ap.add_argument("-log-rotate", dest="log_rotate", type=int, default=0, help="rotate file size limit")
    ap.add_argument("-log-max-rotations", dest="log_max_rotations", type=int, default=1,
                    help="max log file rotations")
    ap.add_argument("-no-permanent", dest="no_permanent", action="store_true", help="exit when no clients")
    ap.add_argument("-foreground", action="store_true", help="run in foreground")
    ap.add_argument("-listen", default=None, help="rv listen port (default: 7500)")
    ap.add_argument("-no-http", dest="no_http", action="store_true", help="no http service")
    ap.add_argument("-http", type=int, default=None, help="port for http service (default: listen + 80)")
    ap.add_argument("-no-mcast", dest="no_mcast", action="store_true", help="no multicast")
    ap.add_argument("-console", action="store_true", help="run with console")
    ap.add_argument("-help", "-h", "--help", action="help", help="this help")
    return ap.parse_args(argv)


def listen_address(text: str | None) -> tuple[str, int]:
    """(host, port) of `-listen`: PORT, HOST:PORT or tcp:PORT; host `*` by default."""
    if not text:
        return "*", DEFAULT_PORT
    spec = text.removeprefix("tcp:")
    host, _, port = spec.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"-listen {text!r}: expected PORT, HOST:PORT or tcp:PORT") from None
    if not 0 < number < 65536:
        raise ConfigError(f"-listen {text!r}: port out of range")
    return host.strip("[]") or "*", number


def default_cfg(prog: str) -> Path:
    """rv.yaml beside the program as invoked (found on PATH when run by name)."""
    path = Path(prog)
    if path.parent == Path("") or str(path.parent) == ".":
        found = shutil.which(prog) if os.sep not in prog else None
        path = Path(found) if found else path.resolve()
    return path.parent / CONFIG_NAME


def build_tree(args: argparse.Namespace, prog: str) -> tuple[ConfigTree, str, str]:
    """The configuration the node runs (its file plus the rvd transports), the
    config's name for messages, and the user[.svc] to run as."""
    cfg = Path(args.cfg) if args.cfg else default_cfg(prog)
    data: dict[str, Any]
    if cfg.exists():
        data = load(cfg).to_dict()
        where = str(cfg)
    else:
        if args.cfg:
            raise ConfigError(f"-cfg {args.cfg!r} does not exist: make one with `ms_gen_key -y -s rvd -o {args.cfg}`")
        from raims_node.config.gen_key import new_network_config

        data = new_network_config("rvd", [])
        where = "<a new rvd service key>"
        log.warning("no %s: running with a service key made now, no other daemon will authenticate this one "
                    "(make one with `ms_gen_key -y -s rvd -o %s`)", cfg, cfg)
    host, port = listen_address(args.listen)
    route: dict[str, Any] = {"listen": host, "port": port}
    if args.no_permanent:
        route["no_permanent"] = True
    if args.no_mcast:
        route["no_mcast"] = True
    transports = [t for t in data.get("transports", []) if t.get("tport") not in (RV_TPORT, WEB_TPORT)]
    transports.append({"tport": RV_TPORT, "type": "rv", "route": route})
    if not args.no_http:
        http = args.http if args.http is not None else port + HTTP_OFFSET
        transports.append({"tport": WEB_TPORT, "type": "web", "route": {"listen": host, "port": http}})
    data["transports"] = transports
    data.pop("startup", None)
    if args.reliability is not None:
        data.setdefault("parameters", {})["reliability"] = f"{args.reliability} secs"
    tree = from_dict(data, where, cfg.parent)
    if args.user:
        from raims_node.config.keyset import check_name

        check_name(args.user.partition(".")[0], "-user")
    user = args.user or f"{socket.gethostname().split('.')[0]}_{port}"
    if "." not in user and len(tree.services) == 1:
        user = f"{user}.{tree.services[0].svc}"
    elif "." not in user and len(tree.services) > 1:  # ms_gen_key -o in a directory of several services
        names = ", ".join(s.svc for s in tree.services)
        raise ConfigError(f"{where} configures the services {names}: choose one with -user NAME.SERVICE, "
                          f"or write rv.yaml from a directory of its own (ms_gen_key -y -s rvd -d DIR -o rv.yaml)")
    return tree, where, user


def rotate_log(args: argparse.Namespace) -> None:
    if args.log and args.log_rotate > 0:
        root = logging.getLogger("raims")
        handler = logging.handlers.RotatingFileHandler(args.log, maxBytes=args.log_rotate,
                                                       backupCount=max(1, args.log_max_rotations))
        if root.handlers:
            handler.setFormatter(root.handlers[0].formatter)
            root.handlers[0].close()
        root.handlers[:] = [handler]


def prepare(args: argparse.Namespace, prog: str) -> tuple[ConfigTree, argparse.Namespace]:
    """The tree to run and ms_server's arguments for it; ConfigError / CryptoError
    when the configuration cannot run (server.rvd_main reports them)."""
    tree, where, user = build_tree(args, prog)
    from raims_node.config.keyset import credentials

    name, _, svc = user.partition(".")
    credentials(tree, name, svc or None)
    tports = [f"{t.tport}.listen" for t in tree.transports if t.tport in (RV_TPORT, WEB_TPORT)]
    ns = argparse.Namespace(config=where, user=user, tports=tports, console=args.console, logfile=args.log,
                            background=False, map_file=None, verbose=False, hup_exits=True)
    return tree, ns
