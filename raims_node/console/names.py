"""How the console names users and transports, and reads its user and path arguments
(manual: "Console": "lex_a2.3 is the user lex_a2 that has a uid of 3", "The * is often
used for uid 0", "The tport_id of 0 is also special").

A user is printed `<name>.<uid>`, this node as `<name>.*`; a transport (or one of a
peer's links) `<name>.<tport_id>`. Names may repeat, the uid and tport id make them
unique on one node.

The uid is the node's (router/uids.py): taken when the node learns of a peer, kept while
it is live and while it is a zombie.
"""

from __future__ import annotations

from raims_node.console.errors import BadArguments
from raims_node.linkstate.records import NUM_PATHS
from raims_node.router.node import Node
from raims_node.wire.subjects import bridge_b64

ALL_USERS = "*"
SELF_UID = "*"
UNKNOWN_NAME_LEN = 8  # an unknown bridge prints as the start of its base64


def tport_label(name: str, tport_id: int) -> str:
    return f"{name}.{tport_id}"


class Names:
    """Labels and lookups over one node's peers, as they are when built."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._uid = node.state.uids

    def users(self) -> list[bytes]:
        """This node, then its live peers by uid."""
        return [self.node.bridge, *sorted(self.node.peers, key=lambda b: self._uid.get(b) or 0)]

    def name(self, b: bytes) -> str:
        if b == self.node.bridge:
            return self.node.user
        peer = self.node.peers.get(b) or self.node.zombies.get(b)
        return peer.user if peer is not None else bridge_b64(b)[:UNKNOWN_NAME_LEN]

    def uid(self, b: bytes) -> int | None:
        return 0 if b == self.node.bridge else self._uid.get(b)

    def user(self, b: bytes) -> str:
        if b == self.node.bridge:
            return f"{self.node.user}.{SELF_UID}"
        uid = self._uid.get(b)
        return self.name(b) if uid is None else f"{self.name(b)}.{uid}"

    def find(self, arg: str) -> list[bytes]:
        """The users `arg` names: `*` for all, else by label (`B.2`) or by name (`B`)."""
        if arg == ALL_USERS:
            return self.users()
        found = [b for b in self.users() if arg in (self.user(b), self.name(b))]
        if not found:
            raise BadArguments(f"no user {arg!r}; users: {', '.join(self.user(b) for b in self.users())}")
        return found

    def find_one(self, arg: str) -> bytes:
        found = self.find(arg)
        if len(found) != 1:
            raise BadArguments(f"{arg!r} names {len(found)} users; give one, e.g. {self.user(found[0])}")
        return found[0]


def path_arg(args: list[str], index: int = 0) -> int:
    """The optional path argument P (0..3, default 0)."""
    if len(args) <= index:
        return 0
    text = args[index]
    if not text.isdigit() or not 0 <= int(text) < NUM_PATHS:
        raise BadArguments(f"path {text!r} is not a number in 0..{NUM_PATHS - 1}")
    return int(text)
