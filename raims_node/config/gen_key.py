"""`ms_gen_key`: create and update the key configuration, export it per node.

Implements the manual's "Running the MS server", "Key Configuration", "Single File
Configuration" and "Service Key Configuration" sections (seed 000), with its flags
and printed lines:

    ms_gen_key -u A B C -s test        create config/ with the service and users A B C
    ms_gen_key -u D -s test            add user D, signed with the existing service key
    ms_gen_key -x A B C -s test        export ./A ./B ./C, each with only its own private key
    ms_gen_key -s test -o test.yaml    also write the single-file configuration
    -d DIR                             the config directory (default ./config)
    -y                                 answer yes instead of asking "OK?"

Library entry points for ms_test_adj and the Spark controller:
`new_network_config(service, users)` and `export_user_config(tree, user)` return the
single-file trees as dicts, and `tree.from_dict` loads them.

Decisions where the manual is vague:
- Files are listed first and written only after "OK?" is answered yes (or with -y);
  each is written to `<path>.new` and renamed. A file whose content would not change
  is not listed; with nothing to do the command prints "no changes".
- Export directories are created in the current directory, named after each user,
  as the manual's example shows; an existing export directory is updated.
- The lines are aligned as the manual prints them: the "-- description" column starts
  five spaces after the longest path.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from raims_node.config.errors import ConfigError
from raims_node.config.keyset import ServiceKeys, check_name, read_secrets
from raims_node.config.tree import ConfigTree, dump_yaml, from_dict, load_dir
from raims_node.crypto import CryptoError

DEFAULT_DIR = "config"
CONFIG_INCLUDE = {"include": "*.yaml"}
PARAM_FILES = {"pass": ".pass", "salt": ".salt"}
PATH_PAD = 4  # spaces after the longest path, then " -- "


@dataclass
class _Op:
    op: str  # "create dir ", "create file", "update file"
    path: Path
    description: str
    content: str | None = None  # None for a directory


class _Plan:
    def __init__(self) -> None:
        self.ops: list[_Op] = []

    def mkdir(self, path: Path, description: str) -> None:
        if not path.is_dir():
            self.ops.append(_Op("create dir ", path, description))

    def file(self, path: Path, content: str, description: str) -> None:
        if path.is_file():
            if path.read_bytes() == content.encode():  # bytes: a file that is not UTF-8 is just different
                return
            self.ops.append(_Op("update file", path, description, content))
        else:
            self.ops.append(_Op("create file", path, description, content))

    def lines(self) -> list[str]:
        width = max((len(str(op.path)) for op in self.ops), default=0) + PATH_PAD
        return [f"{op.op} {str(op.path).ljust(width)} -- {op.description}" for op in self.ops]

    def commit(self) -> None:
        for op in self.ops:
            if op.content is None:
                op.path.mkdir(parents=True, exist_ok=True)
        staged = [(_staged(op.path, op.content, private=op.path.name in (".salt", ".pass")), op.path)
                  for op in self.ops if op.content is not None]
        for tmp, path in staged:
            tmp.replace(path)


def _staged(path: Path, text: str, private: bool) -> Path:
    """`text` in `path`'s `.new` file, to be renamed over `path`; a private one (the
    secrets, or what holds them) is readable by its owner only from the start."""
    tmp = path.with_name(path.name + ".new")
    tmp.unlink(missing_ok=True)  # a leftover keeps its mode: made anew, the mode is ours
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return tmp


def write_private(path: Path, text: str) -> None:
    """`text` to `path`, readable by its owner only from the start: a single-file config
    holds the sealed private keys and the pass_data and salt_data that open them."""
    _staged(path, text, private=True).replace(path)


def _svc_file(d: Path, svc: str) -> Path:
    return d / f"svc_{svc}.yaml"


def _user_file(d: Path, user: str, svc: str) -> Path:
    return d / f"user_{user}_svc_{svc}.yaml"


def _key_files(plan: _Plan, d: Path, keys: ServiceKeys, users: Sequence[str] | None = None) -> None:
    """The service file and the user files (all users, or only `users`)."""
    plan.file(_svc_file(d, keys.svc), dump_yaml({"services": [keys.service_config().to_dict()]}),
              "defines the service and signs users")
    for user in keys.users if users is None else users:
        plan.file(_user_file(d, user, keys.svc), dump_yaml({"users": [keys.user_config(user).to_dict()]}),
                  "defines the user")


def _param_text(params: dict[str, Any]) -> str:
    return dump_yaml({"parameters": params})


def _shared_params(tree: ConfigTree | None) -> dict[str, Any]:
    """The parameters an exported node shares with the master, less the secrets."""
    params = {} if tree is None else tree.parameters.to_dict()
    for name in ("salt_data", "pass_data", *PARAM_FILES):
        params.pop(name, None)
    return params


# ---------------------------------------------------------------- library API


def new_network_config(service: str, users: list[str]) -> dict[str, Any]:
    """A new service signing `users`, as the single-file tree `ms_gen_key -o` writes."""
    check_name(service, "service")
    keys = ServiceKeys.create_new(service)
    for user in users:
        keys.add_user(user)
    return keys.to_single_file()


def export_user_config(tree: dict[str, Any], user: str) -> dict[str, Any]:
    """The single-file tree of one node: only `user`'s private key, under a new password."""
    loaded = from_dict(tree)
    svcs = [u.svc for u in loaded.users if u.user == user]
    if len(svcs) != 1:
        raise ConfigError(f"user {user!r} is configured in {len(svcs)} services, expected 1")
    keys = ServiceKeys.from_tree(loaded, svcs[0]).export(user)
    return keys.to_single_file(_shared_params(loaded))


# ---------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ms_gen_key", description="Create, update and export Rai MS keys.")
    p.add_argument("-d", dest="dir", default=DEFAULT_DIR, help="config directory (default: config)")
    p.add_argument("-s", dest="svc", help="service name")
    p.add_argument("-u", dest="users", nargs="+", default=[], metavar="USER", help="users to create")
    p.add_argument("-x", dest="export", nargs="+", default=[], metavar="USER", help="users to export")
    p.add_argument("-o", dest="output", metavar="FILE", help="write the single-file configuration")
    p.add_argument("-y", dest="yes", action="store_true", help="do not ask OK?")
    return p


def _ask(out: TextIO, stdin: TextIO) -> bool:
    out.write("OK? ")
    out.flush()
    answer = stdin.readline()
    return answer[:1] in ("y", "Y")


def run(argv: Sequence[str], out: TextIO, err: TextIO, stdin: TextIO) -> int:
    parser = _parser()
    args = parser.parse_args(list(argv))
    if not args.svc:
        parser.error("a service is required (-s SVC)")  # a usage error: exit 2
    check_name(args.svc, "service")
    for user in [*args.users, *args.export]:
        check_name(user, "user")
    d = Path(args.dir.rstrip("/") or ".")
    plan = _Plan()
    tree: ConfigTree | None = None
    keys: ServiceKeys | None = None
    if (d / "config.yaml").is_file() or (d / ".salt").is_file():
        tree = load_dir(d)
        if any(s.svc == args.svc for s in tree.services):
            out.write(f'- Loading service "{args.svc}"\n')
            keys = ServiceKeys.from_tree(tree, args.svc)
            out.write("- Signatures ok\n")
        else:
            keys = ServiceKeys.create_new(args.svc, read_secrets(tree))
    if keys is None:
        keys = ServiceKeys.create_new(args.svc)
        plan.mkdir(d, "the configure directory")
        plan.file(d / ".salt", keys.secrets.salt_text + "\n", "generate new salt")
        plan.file(d / ".pass", keys.secrets.pass_text + "\n", "generated a new password")
        plan.file(d / "config.yaml", dump_yaml(CONFIG_INCLUDE), "base include file")
        plan.file(d / "param.yaml", _param_text(dict(PARAM_FILES)), "parameters file")
    for user in args.users:
        if user not in keys.users:
            keys.add_user(user)
    _key_files(plan, d, keys)
    for user in args.export:
        ex = keys.export(user)
        xd = Path(user)
        plan.mkdir(xd, "exported configure directory")
        plan.file(xd / ".salt", ex.secrets.salt_text + "\n", "a copy of salt")
        plan.file(xd / ".pass", ex.secrets.pass_text + "\n", "generated a new password")
        plan.file(xd / "param.yaml", _param_text({**PARAM_FILES, **_shared_params(tree)}), "a copy of param")
        plan.file(xd / "config.yaml", dump_yaml(CONFIG_INCLUDE), "base include file")
        _key_files(plan, xd, ex)
    for line in plan.lines():
        out.write(line + "\n")
    if not plan.ops:
        out.write("no changes\n")
    else:
        if not args.yes and not _ask(out, stdin):
            err.write("aborting: nothing written (answer y, or run with -y)\n")
            return 1
        plan.commit()
        out.write("done\n")
    if args.output:
        single = load_dir(d)
        secrets = read_secrets(single)
        whole = single.to_dict()
        params = {k: v for k, v in single.parameters.items() if k not in PARAM_FILES}
        whole["parameters"] = {**params, "salt_data": secrets.salt_text, "pass_data": secrets.pass_text}
        write_private(Path(args.output), dump_yaml(whole))
        out.write(f'- Output config to "{args.output}"\n')
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv, sys.stdout, sys.stderr, sys.stdin)
    except (ConfigError, CryptoError, OSError) as exc:
        sys.stderr.write(f"ms_gen_key: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
