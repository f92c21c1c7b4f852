"""Which console commands a `GET /?<command>` may run (the manual: every console
command is exposed on the http endpoint), and why one may not.

Decisions:
- A command that writes a file on the node's host (`wevents F`, `sub S F`, `psub P F`,
  `gsub P F`, `snap S F`) is console only: a URL must not choose a path the node overwrites; so are
  NodeBrain's `message.create`, `message.prune` and `message.export`, which create,
  retire and print message files under any path the URL names.
- A command that changes the node or sends into the network (connect, shutdown,
  configure, save, pub, rpc, remote, debug, ...) is refused when the browser says the
  request came from another site (`Sec-Fetch-Site: cross-site` / `same-site`, or an
  `Origin` that is not this host): a page elsewhere must not drive the node through
  its operator's browser (cross-site request forgery). Reading (`show ...`) and the
  pings stay open to any page, as they change nothing. Clients that are not browsers
  send neither header and are not affected.
- What lasts only as long as a console session (sub, psub, gsub and their unsubs,
  mute, unmute, cancel, the `configure transport T` sub-mode) has nothing to act on in
  a request's own session: refused with where to do it instead (the websocket `/ws`
  for subscriptions), not answered as done.
- die, quit and exit are refused: a page does not end the node or a session it has not.
- The websocket (`/ws`, pub/sub) is refused to another site's page as well: browsers send
  `Origin` with every websocket handshake.
"""

from __future__ import annotations

from collections.abc import Mapping

READ_ONLY = frozenset({"ping", "tping", "mping", "show rpcs"})
FILE_WRITERS = frozenset({"wevents", "message.create", "message.prune", "message.export"})
SESSION_ONLY = {
    **dict.fromkeys(("sub", "psub", "gsub", "unsub", "punsub", "gunsub"),
                    "a subscription lasts as long as its console session: subscribe on the websocket /ws"),
    **dict.fromkeys(("mute", "unmute", "cancel"), "it acts on a console session, and a request has none"),
}
ENDS_A_SESSION = frozenset({"die", "quit", "exit"})


def refusal(verb: str, args: list[str], session: bool, headers: Mapping[str, str], host: str) -> str | None:
    """Why command `verb` (with `args`; `session`: one that acts, run in a session of its
    own) may not run for this request, or None."""
    if verb in FILE_WRITERS or verb in ("sub", "psub", "gsub", "snap") and len(args) > 1:  # `sub S F`: F
        return f"{verb} works on files of the node's host: run it in the console (telnet, ms_server -c)"
    if not session:
        return None  # the show commands: they change nothing
    if verb in ENDS_A_SESSION:
        return f"{verb} is not run over HTTP: a page does not end the node or a session"
    if verb in SESSION_ONLY:
        return f"{verb} is not run over HTTP: {SESSION_ONLY[verb]}"
    if verb == "configure transport" and len(args) < 2:
        return "configure transport T over HTTP takes its fields on the line: configure transport T type tcp port 9"
    if verb not in READ_ONLY and cross_site(headers, host):
        return f"{verb} changes the node: refused for a request from another site (its Origin or Sec-Fetch-Site)"
    return None


def cross_site(headers: Mapping[str, str], host: str) -> bool:
    """Whether a browser says the request came from a page of another site."""
    if headers.get("Sec-Fetch-Site", "").lower() in ("cross-site", "same-site"):
        return True
    origin = headers.get("Origin")
    if origin is None:
        return False
    return origin == "null" or origin.split("://", 1)[-1].rstrip("/") != host
