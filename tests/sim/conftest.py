"""Credentials for simulated networks: one signed service, users made on demand."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

from raims_node.config.gen_key import new_network_config
from raims_node.config.keyset import credentials
from raims_node.config.tree import from_dict
from raims_node.crypto.credentials import Credentials

USERS = [chr(ord("A") + i) for i in range(26)] + [f"n{i}" for i in range(300)]


@functools.lru_cache(maxsize=4)
def _tree(service: str, users: tuple[str, ...]):  # type: ignore[no-untyped-def]
    return from_dict(new_network_config(service, list(users)))


def creds_factory(service: str = "test", users: tuple[str, ...] = tuple(USERS[:40])) -> Callable[[str], Credentials]:
    tree = _tree(service, users)
    cache: dict[str, Credentials] = {}

    def make(user: str) -> Credentials:
        if user not in cache:
            cache[user] = credentials(tree, user, service)
        return cache[user]

    return make


@pytest.fixture(scope="session")
def creds() -> Callable[[str], Credentials]:
    return creds_factory()
