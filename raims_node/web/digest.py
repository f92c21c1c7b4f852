"""HTTP digest authentication for the web transport (manual, "Web": `http_username`,
`http_password`, `http_realm`, `htdigest`; RFC 7616 with MD5 and qop=auth, which wget,
curl and browsers speak, and the htdigest file format `user:realm:HA1`).

Nonces are stateless: `<time>.<HMAC(secret, time)>`, valid for NONCE_TTL_S; an
expired one is answered with `stale=true` so the client retries without asking the
person again. Nonce counts are not tracked (a replayed request within the nonce's
lifetime is accepted, as many servers do; the page it fetches is read-only).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from aiohttp import web

DEFAULT_REALM = "realm@raims"
NONCE_TTL_S = 300
OPEN_PATHS = frozenset({"/healthz"})  # health checks stay open

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_PARAM = re.compile(r'(\w+)=(?:"([^"]*)"|([^\s,]+))')


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def load_htdigest(path: str | Path, realm: str | None = None) -> dict[str, tuple[str, str]]:
    """user -> (realm, HA1) from an htdigest file (only `realm`'s lines when given)."""
    users: dict[str, tuple[str, str]] = {}
    for line in Path(path).read_text().splitlines():
        parts = line.strip().split(":")
        if len(parts) == 3 and (realm is None or parts[1] == realm):
            users[parts[0]] = (parts[1], parts[2])
    return users


class DigestAuth:
    """Users as user -> (realm, HA1); `middleware` guards every path but OPEN_PATHS."""

    def __init__(self, users: Mapping[str, tuple[str, str]], realm: str) -> None:
        self.users = dict(users)
        self.realm = realm
        self._secret = os.urandom(16)

    @classmethod
    def from_route(cls, route: Mapping[str, object], base: Path | None = None) -> DigestAuth | None:
        """The auth a web transport's route asks for, or None."""
        realm = str(route.get("http_realm") or DEFAULT_REALM)
        users: dict[str, tuple[str, str]] = {}
        htdigest = route.get("htdigest")
        if htdigest:
            path = Path(str(htdigest))
            users.update(load_htdigest(path if path.is_absolute() or base is None else base / path))
            if users and not route.get("http_realm"):
                realm = next(iter(users.values()))[0]
        name, password = route.get("http_username"), route.get("http_password")
        if name and password is not None:
            users[str(name)] = (realm, md5(f"{name}:{realm}:{password}"))
        return cls(users, realm) if users else None

    def nonce(self, now: float | None = None) -> str:
        stamp = str(int(time.time() if now is None else now))
        return f"{stamp}.{hmac.new(self._secret, stamp.encode(), 'sha256').hexdigest()[:32]}"

    def _nonce_state(self, nonce: str) -> str:
        stamp, _, mac = nonce.partition(".")
        if not stamp.isdigit() or not hmac.compare_digest(mac, self.nonce(int(stamp)).partition(".")[2]):
            return "bad"
        return "stale" if time.time() - int(stamp) > NONCE_TTL_S else "ok"

    def challenge(self, stale: bool = False) -> web.HTTPUnauthorized:
        value = (f'Digest realm="{self.realm}", qop="auth", algorithm=MD5, nonce="{self.nonce()}"'
                 + (", stale=true" if stale else ""))
        return web.HTTPUnauthorized(headers={"WWW-Authenticate": value}, text="authentication required\n")

    def check(self, method: str, header: str | None) -> str:
        """"ok", "stale" or "bad" for a request's Authorization header."""
        if not header or not header.startswith("Digest "):
            return "bad"
        p = {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _PARAM.finditer(header[7:])}
        user = self.users.get(p.get("username", ""))
        if user is None or p.get("realm") != user[0] or "nonce" not in p or "uri" not in p:
            return "bad"
        state = self._nonce_state(p["nonce"])
        if state == "bad":
            return "bad"
        ha2 = md5(f"{method}:{p['uri']}")
        if p.get("qop") == "auth":
            want = md5(f"{user[1]}:{p['nonce']}:{p.get('nc', '')}:{p.get('cnonce', '')}:auth:{ha2}")
        else:
            want = md5(f"{user[1]}:{p['nonce']}:{ha2}")
        if not hmac.compare_digest(want, p.get("response", "")):
            return "bad"
        return state

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        state = self.check(request.method, request.headers.get("Authorization"))
        if state != "ok":
            raise self.challenge(stale=state == "stale")
        return await handler(request)
