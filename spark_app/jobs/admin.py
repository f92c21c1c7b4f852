"""A node's admin web transport, read from a task on the node's host: `GET /?show ...`
answers a console command's rows as JSON, `GET /healthz` whether the node converged
(raims_node.web.admin; manual "Web"). The admin listens on loopback, so only a task on
the same machine reaches it. Standard library only: executors need nothing more.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Final

from spark_app.jobs.errors import CollectError

ADMIN_TIMEOUT_S: Final = 5.0


def _get(url: str, timeout: float) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read())
        except ValueError:
            return exc.code, None


def show(addr: str, command: str, timeout: float = ADMIN_TIMEOUT_S) -> list[dict[str, Any]]:
    """The rows of console `command` on the node whose admin listens at `addr`."""
    url = f"http://{addr}/?{urllib.parse.quote(command)}"
    try:
        status, body = _get(url, timeout)
    except (OSError, ValueError) as exc:
        raise CollectError(f"{url}: {exc}") from None
    if status != 200 or not isinstance(body, list):
        raise CollectError(f"{url}: HTTP {status}: {body!r:.300}")
    return body


def health(addr: str, timeout: float = ADMIN_TIMEOUT_S) -> tuple[bool, dict[str, Any]]:
    """(converged, the /healthz body); a node that does not answer is not converged."""
    try:
        status, body = _get(f"http://{addr}/healthz", timeout)
    except (OSError, ValueError) as exc:
        return False, {"error": str(exc)}
    return status == 200, body if isinstance(body, dict) else {}
