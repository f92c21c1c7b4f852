"""A service's keys as the configuration holds them: create, load, verify, sign, export.

Implements the manual's "Key Configuration" and "Single File Configuration" sections
(seed 000) below the `ms_gen_key` command line: the salt and password, the service key
pair, the users it signs, the exported per-node key sets, and the `Credentials` a
node authenticates with.

Decisions where the manual is vague:
- `.salt` holds the 640-byte salt and `.pass` a 32-byte random password, each as one
  line of base64 (the same text as `salt_data` / `pass_data`).
- The `salt` / `pass` parameters name those files relative to the config directory
  (or the single file's directory); without the parameters `.salt` and `.pass` are
  looked for there. `salt_data` / `pass_data` take precedence over the files.
- Loading a service verifies every user record of that service against the service's
  signature; a user record without a valid signature is an error, never skipped.
- A node whose user is not configured can still run when it holds the service's
  private key: it signs with the service key, as the manual allows. A configured user
  must hold its own private key (peers encrypt its session keys to it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from raims_node.config.errors import ConfigError, KeyConfigError
from raims_node.config.tree import ConfigTree, Loc, ServiceConfig, UserConfig
from raims_node.crypto import CryptoError
from raims_node.crypto.credentials import Credentials, PeerUser, Signer
from raims_node.crypto.kdf import SALT_LEN, Kdf
from raims_node.crypto.keys import (
    SIG_LEN,
    KeyPair,
    PublicKeys,
    b64decode,
    b64encode,
    sign_user,
    verify_user,
)
from raims_node.crypto.sealed import Sealer, owner

SALT_FILE = ".salt"
PASS_FILE = ".pass"
PASS_LEN = 32


def create_stamp(now: float | None = None) -> str:
    """A create time as the manual writes it: seconds.nanoseconds."""
    ns = time.time_ns() if now is None else int(now * 1e9)
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


@dataclass(frozen=True)
class Secrets:
    """The salt (mixed into every derived key) and the password sealing private keys."""

    salt: bytes
    password: bytes

    @classmethod
    def generate(cls) -> Secrets:
        return cls(os.urandom(SALT_LEN), os.urandom(PASS_LEN))

    def with_new_password(self) -> Secrets:
        return Secrets(self.salt, os.urandom(PASS_LEN))

    @property
    def salt_text(self) -> str:
        return b64encode(self.salt)

    @property
    def pass_text(self) -> str:
        return b64encode(self.password)

    def kdf(self) -> Kdf:
        return Kdf(self.salt)


def _secret(tree: ConfigTree, data_param: str, file_param: str, default_file: str, what: str) -> bytes:
    inline = tree.parameters.text(data_param)
    if inline:
        try:
            return b64decode(inline, what=data_param)
        except CryptoError as exc:
            raise KeyConfigError(str(exc), field=data_param) from None
    name = tree.parameters.text(file_param) or default_file
    base = tree.base_dir
    path = Path(name) if Path(name).is_absolute() or base is None else base / name
    if base is None and not Path(name).is_absolute():
        raise KeyConfigError(f"private keys cannot be read: no {what}; set {data_param} "
                             f"(configuration from stdin has no directory for {name!r})")
    try:
        text = path.read_text(encoding="ascii")
    except UnicodeDecodeError:
        raise KeyConfigError(f"private keys cannot be read: the {what} file {str(path)!r} is not base64 text") from None
    except FileNotFoundError:
        raise KeyConfigError(f"private keys cannot be read: the {what} file {str(path)!r} is missing "
                             f"(and {data_param} is not set)") from None
    except OSError as exc:  # there, but not readable by this user (or not a file)
        raise KeyConfigError(f"private keys cannot be read: the {what} file {str(path)!r}: {exc.strerror}") from None
    try:
        return b64decode(text, what=str(path))
    except CryptoError as exc:
        raise KeyConfigError(str(exc)) from None


def read_secrets(tree: ConfigTree) -> Secrets:
    """The salt and password of a loaded tree (inline data or the .salt/.pass files)."""
    salt = _secret(tree, "salt_data", "salt", SALT_FILE, "salt")
    if len(salt) != SALT_LEN:
        raise KeyConfigError(f"salt must be {SALT_LEN} bytes, got {len(salt)}")
    password = _secret(tree, "pass_data", "pass", PASS_FILE, "password")
    if not password:
        raise KeyConfigError("the password is empty")
    return Secrets(salt, password)


@dataclass(frozen=True)
class UserKeys:
    user: str
    svc: str
    create: str
    expires: str | None
    pub: PublicKeys
    signature: bytes
    pair: KeyPair | None = None  # present when this key set holds the private key
    sealed: str | None = None  # the `pri:` text, kept so unchanged files stay unchanged


class ServiceKeys:
    """One service: its key pair, the users it signed, and the secrets sealing them."""

    def __init__(
        self,
        svc: str,
        create: str,
        pub: PublicKeys,
        secrets: Secrets,
        pair: KeyPair | None = None,
        sealed: str | None = None,
        users: Iterable[UserKeys] = (),
    ) -> None:
        self.svc = svc
        self.create = create
        self.pub = pub
        self.secrets = secrets
        self.pair = pair
        self._sealed = sealed
        self.users: dict[str, UserKeys] = {u.user: u for u in users}
        self.kdf = secrets.kdf()
        self._sealer = Sealer(self.kdf, secrets.password)

    # -- creating

    @classmethod
    def create_new(cls, svc: str, secrets: Secrets | None = None) -> ServiceKeys:
        check_name(svc, "service")
        pair = KeyPair.generate()
        return cls(svc, create_stamp(), pair.public, secrets or Secrets.generate(), pair)

    def add_user(self, user: str, expires: str | None = None) -> UserKeys:
        """Generate a user key pair and sign it with the service key."""
        if self.pair is None:
            raise KeyConfigError(f"service {self.svc!r} has no private key here: cannot sign user {user!r}")
        if user in self.users:
            raise KeyConfigError(f"user {user!r} already exists in service {self.svc!r}")
        check_name(user, "user")
        pair = KeyPair.generate()
        create = create_stamp()
        sig = sign_user(self.pair, self.svc, user, create, expires, pair.public)
        keys = UserKeys(user, self.svc, create, expires, pair.public, sig, pair)
        self.users[user] = keys
        return keys

    # -- loading

    @classmethod
    def from_tree(cls, tree: ConfigTree, svc: str | None = None) -> ServiceKeys:
        """Load and verify a service of a tree, opening the private keys it holds."""
        scfg = tree.service(svc)
        secrets = read_secrets(tree)
        keys = cls(scfg.svc, scfg.create, _pub(scfg.pub, scfg.loc), secrets)
        if scfg.pri is not None:
            keys.pair = keys._open(scfg.pri, owner("svc", scfg.svc, scfg.svc), keys.pub, scfg.loc)
            keys._sealed = scfg.pri
        for ucfg in tree.users:
            if ucfg.svc != scfg.svc:
                continue
            keys.users[ucfg.user] = keys._load_user(scfg, ucfg)
        return keys

    def _load_user(self, scfg: ServiceConfig, ucfg: UserConfig) -> UserKeys:
        pub = _pub(ucfg.pub, ucfg.loc)
        sig_text = scfg.users.get(ucfg.user)
        if sig_text is None:
            raise KeyConfigError(f"user {ucfg.user!r} is not signed by service {scfg.svc!r}",
                                 ucfg.loc.source, ucfg.loc.line, "user")
        try:
            sig = b64decode(sig_text, SIG_LEN, f"signature of {ucfg.user!r}")
        except CryptoError as exc:
            raise KeyConfigError(str(exc), scfg.loc.source, scfg.loc.line, "users") from None
        if not verify_user(self.pub, scfg.svc, ucfg.user, ucfg.create, ucfg.expires, pub, sig):
            raise KeyConfigError(f"signature of user {ucfg.user!r} does not verify with service {scfg.svc!r}",
                                 ucfg.loc.source, ucfg.loc.line, "user")
        pair = None
        if ucfg.pri is not None:
            pair = self._open(ucfg.pri, owner("user", ucfg.user, scfg.svc), pub, ucfg.loc)
        return UserKeys(ucfg.user, scfg.svc, ucfg.create, ucfg.expires, pub, sig, pair, ucfg.pri)

    def _open(self, text: str, aad: bytes, pub: PublicKeys, loc: Loc) -> KeyPair:
        try:
            pair = KeyPair.from_bytes(self._sealer.open(b64decode(text, what="pri"), aad))
        except CryptoError as exc:
            raise KeyConfigError(str(exc), loc.source, loc.line, "pri") from None
        if pair.public != pub:
            raise KeyConfigError("private key does not match the public key", loc.source, loc.line, "pri")
        return pair

    # -- writing

    def _seal(self, pair: KeyPair, aad: bytes) -> str:
        return b64encode(self._sealer.seal(pair.to_bytes(), aad))

    def service_config(self, include_pri: bool = True) -> ServiceConfig:
        pri = None
        if include_pri and self.pair is not None:
            if self._sealed is None:
                self._sealed = self._seal(self.pair, owner("svc", self.svc, self.svc))
            pri = self._sealed
        sigs = {u.user: b64encode(u.signature) for u in self.users.values()}
        return ServiceConfig(self.svc, self.create, self.pub.to_b64(), pri, sigs)

    def user_config(self, user: str) -> UserConfig:
        u = self.user(user)
        pri = None
        if u.pair is not None:
            if u.sealed is None:
                u = replace(u, sealed=self._seal(u.pair, owner("user", u.user, self.svc)))
                self.users[user] = u
            pri = u.sealed
        return UserConfig(u.user, self.svc, u.create, u.pub.to_b64(), pri, u.expires)

    def user(self, user: str) -> UserKeys:
        try:
            return self.users[user]
        except KeyError:
            raise KeyConfigError(f"user {user!r} is not configured in service {self.svc!r}") from None

    def export(self, user: str) -> ServiceKeys:
        """The key set of one node: only `user`'s private key, under a new password."""
        keys = self.user(user)
        if keys.pair is None:
            raise KeyConfigError(f'user "{user}" is not configured with a private key')
        out = ServiceKeys(self.svc, self.create, self.pub, self.secrets.with_new_password())
        for u in self.users.values():
            out.users[u.user] = replace(u, pair=u.pair if u.user == user else None, sealed=None)
        return out

    def to_single_file(self, parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The single-file tree: service, users, and parameters with salt_data/pass_data."""
        params = {k: v for k, v in (parameters or {}).items() if k not in ("salt", "pass", "salt_data", "pass_data")}
        params["salt_data"] = self.secrets.salt_text
        params["pass_data"] = self.secrets.pass_text
        out: dict[str, Any] = {"services": [self.service_config().to_dict()]}
        if self.users:
            out["users"] = [self.user_config(u).to_dict() for u in self.users]
        out["parameters"] = params
        return out

    # -- running

    def credentials(self, user: str) -> Credentials:
        """What the node running as `user` authenticates with."""
        peers = {u.user: PeerUser(u.user, u.create, u.expires, u.pub) for u in self.users.values()}
        known = self.users.get(user)
        if known is not None and known.pair is not None:
            return Credentials(self.kdf, self.svc, self.pub, user, known.create, known.expires,
                               Signer.USER, known.pair, peers)
        if known is not None:
            # peers encrypt to a configured user's own key (handshake.py): the service
            # key cannot stand in for it
            raise KeyConfigError(f"no private key for user {user!r} in this configuration")
        if self.pair is not None:
            return Credentials(self.kdf, self.svc, self.pub, user, self.create, None,
                               Signer.SERVICE, self.pair, peers)
        raise KeyConfigError(f"no private key for user {user!r} or service {self.svc!r} in this configuration")


def _pub(text: str, loc: Loc) -> PublicKeys:
    try:
        return PublicKeys.from_b64(text)
    except CryptoError as exc:
        raise KeyConfigError(str(exc), loc.source, loc.line, "pub") from None


def check_name(name: str, what: str) -> None:
    """A name that is one token of a subject (`_N.PEER.<user>.<uid>`, ...): no separator,
    and not a whole-token wildcard (`*`, `>`), which would turn the node's own subjects
    into patterns."""
    if not name or any(c in name for c in "/\\ \t\n.") or name.startswith("-") or name in ("*", ">"):
        raise ConfigError(f"{what} name {name!r} must be non-empty without '/', '.', spaces or a leading '-', "
                          "and not '*' or '>'")


def credentials(tree: ConfigTree, user: str, svc: str | None = None) -> Credentials:
    """Credentials for `ms_server -u user.svc`: `user` may be "name" or "name.svc"."""
    if svc is None and "." in user:
        user, svc = user.split(".", 1)
    return ServiceKeys.from_tree(tree, svc).credentials(user)
