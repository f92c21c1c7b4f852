"""The keys of a rollout: the service's master key configuration, created on the first run
and loaded on later ones, and one exported configuration per node.

Issue "The main job", item 2; manual "Key Configuration" and "Service Key Configuration".
Runs on the driver only: the master configuration (the service's private key and every
user's) never leaves it; what is shipped to a task is one node's export.

Decisions:
- The master configuration is an ms_gen_key directory, `<lake>/keys/<service>/` unless
  the settings name another, created and extended by ms_gen_key itself (`gen_key.run`
  with -y), so its layout and file modes are the tool's: private keys sealed in the
  YAML files, the password and the salt in `.pass` and `.salt` (mode 0600), the keys
  directory 0700. A node of the plan that the configuration lacks is added (signed with
  the service key); users no longer planned stay, so an earlier plan can run again.
- An export (`gen_key.export_user_config`) holds only its node's private key, sealed
  under a fresh password, with the salt and that password inline; each run's exports
  therefore differ, and no export opens another's key.
- A lake given as a URL (s3://, dbfs:) needs a local keys directory in the settings:
  keys are never written where ms_gen_key cannot write them as files.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from raims_node.config.errors import ConfigError
from raims_node.config.gen_key import PARAM_FILES, export_user_config
from raims_node.config.gen_key import run as gen_key_run
from raims_node.config.keyset import read_secrets
from raims_node.config.tree import load_dir
from raims_node.crypto import CryptoError
from spark_app.jobs.errors import PlanError

KEYS_FOLDER: Final = "keys"
KEYS_DIR_MODE: Final = 0o700


def keys_dir(lake: str, service: str, configured: str | None = None) -> Path:
    """Where the master configuration of `service` lives."""
    if configured:
        return Path(configured).resolve() / service
    if "://" in lake or lake.startswith("dbfs:"):
        raise PlanError(f"lake {lake!r} is not a local directory: set keys_dir in the rollout config "
                        "to a local directory for the service keys")
    return Path(lake).resolve() / KEYS_FOLDER / service


@dataclass(frozen=True)
class MasterKeys:
    directory: Path
    service: str
    created: bool
    added: tuple[str, ...]
    tree: dict[str, Any] = field(repr=False)  # single-file form, secrets inline: driver memory only

    @property
    def users(self) -> list[str]:
        return [u["user"] for u in self.tree.get("users", ())]

    def export(self, user: str) -> dict[str, Any]:
        """The single-file configuration of node `user`: its own private key only."""
        try:
            return export_user_config(self.tree, user)
        except (ConfigError, CryptoError) as exc:
            raise PlanError(f"cannot export node {user!r} from {self.directory}: {exc}") from None


def _gen_key(directory: Path, service: str, users: Sequence[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = ["-d", str(directory), "-s", service, "-y", *(["-u", *users] if users else [])]
    try:
        status = gen_key_run(argv, out, err, io.StringIO())
    except (ConfigError, CryptoError, OSError) as exc:
        raise PlanError(f"ms_gen_key {' '.join(argv)}: {exc}") from None
    if status != 0:
        raise PlanError(f"ms_gen_key {' '.join(argv)} failed: {err.getvalue().strip() or out.getvalue().strip()}")


def _single_file(directory: Path) -> dict[str, Any]:
    """The directory as one tree with the secrets inline (what `ms_gen_key -o` writes,
    kept in memory)."""
    tree = load_dir(directory)
    secrets = read_secrets(tree)
    whole = tree.to_dict()
    params = {k: v for k, v in tree.parameters.items() if k not in PARAM_FILES}
    whole["parameters"] = {**params, "salt_data": secrets.salt_text, "pass_data": secrets.pass_text}
    return whole


def ensure_master_keys(directory: Path, service: str, users: Sequence[str]) -> MasterKeys:
    """Load the master configuration at `directory`, creating it or adding `users` it lacks."""
    created = not (directory / ".salt").is_file()
    try:
        directory.parent.mkdir(parents=True, exist_ok=True, mode=KEYS_DIR_MODE)
    except OSError as exc:  # was a bare FileNotFoundError as the rollout's failure, after the session
        raise PlanError(f"keys directory {directory}: cannot create {exc.filename or directory.parent}: "
                        f"{exc.strerror or exc} (set keys_dir / --keys-dir)") from None
    known: list[str] = []
    if not created:
        try:
            known = [u.user for u in load_dir(directory).users if u.svc == service]
        except (ConfigError, CryptoError) as exc:
            raise PlanError(f"master keys at {directory}: {exc}") from None
    missing = [u for u in users if u not in known]
    if created or missing:
        _gen_key(directory, service, missing)
        directory.chmod(KEYS_DIR_MODE)
    try:
        tree = _single_file(directory)
    except (ConfigError, CryptoError) as exc:
        raise PlanError(f"master keys at {directory}: {exc}") from None
    return MasterKeys(directory, service, created, tuple(missing), tree)
