"""transports/addr.py: listen / connect values with ports overriding `port`."""

from __future__ import annotations

import pytest

from raims_node.transports.addr import AddressError, split_address
from raims_node.transports.name import local_interfaces


@pytest.mark.parametrize(("text", "port", "want"), [
    ("localhost", 9000, ("localhost", 9000)),
    ("localhost:8000", 9000, ("localhost", 8000)),
    ("*", None, ("*", None)),
    ("*:7000", None, ("*", 7000)),
    (":7000", None, ("*", 7000)),
    ("[::1]:8000", 1, ("::1", 8000)),
    ("[::1]", 1, ("::1", 1)),
    ("::1", 5, ("::1", 5)),
    ("10.1.2.3:80", None, ("10.1.2.3", 80)),
])
def test_split(text: str, port: int | None, want: tuple[str, int | None]) -> None:
    assert split_address(text, port) == want


@pytest.mark.parametrize("text", ["host:http", "host:99999", "[::1", "[::1]x"])
def test_bad(text: str) -> None:
    with pytest.raises(AddressError):
        split_address(text, None)


def test_interface_name_resolves_first() -> None:
    ifaces = local_interfaces()
    if not ifaces:
        pytest.skip("no IPv4 interfaces listed here")
    assert split_address(f"{ifaces[0].name}:8000", None) == (str(ifaces[0].address), 8000)
