"""Addresses in a transport's `listen` / `connect` fields (manual "TCP Point-to-point").

"If the listen or connect parameters specify a port, as in "localhost:8000", then that
port overrides the parameter port configured. A device name is resolved before the
hostname DNS resolver is tried, so "eth0:8000" will resolve the address configured on
the eth0 device."

Forms: `host`, `host:port`, `[v6]`, `[v6]:port`, a bare IPv6 address (several colons,
no port), `*` or `*:port` (every address). A host that names a local interface becomes
that interface's IPv4 address; anything else is left to the resolver of the socket call.
"""

from __future__ import annotations

from raims_node.transports.name import local_interfaces

WILDCARD = "*"


class AddressError(ValueError):
    """A listen / connect value that is not an address."""


def split_address(text: str, port: int | None) -> tuple[str, int | None]:
    """(host, port) of `text`; its own port overrides `port`."""
    text = text.strip()
    host, own = text, ""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise AddressError(f"address {text!r} has no closing ']'")
        host, rest = text[1:end], text[end + 1:]
        if rest and not rest.startswith(":"):
            raise AddressError(f"address {text!r}: expected ':port' after ']'")
        own = rest[1:]
    elif text.count(":") == 1:
        host, _, own = text.partition(":")
    if own:
        if not own.isdigit() or int(own) > 65535:
            raise AddressError(f"address {text!r} has a bad port {own!r}")
        port = int(own)
    return device_host(host or WILDCARD), port


def device_host(host: str) -> str:
    """The IPv4 address of interface `host`, or `host` when no interface has that name."""
    if host == WILDCARD or host[:1].isdigit() or ":" in host:
        return host
    for iface in local_interfaces():
        if iface.name == host:
            return str(iface.address)
    return host
