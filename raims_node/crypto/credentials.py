"""What a node knows to authenticate itself and its peers.

Implements the inputs of the manual's "Key Exchange" (seed 000): the service's public
key (a pre-shared key that never goes on the wire), the salt (through the KDF), the
public keys of the users the service has signed, and the private key this node signs
its AUTH messages with: its user's, or the service's when it holds that instead
("a user's private key can only authenticate itself", the service's can sign users
that are not configured).

`user_hmac` is the 16-byte user identifier carried in every heartbeat and AUTH (the
manual's `user_hmac_16`); the manual does not say how it is made, so it is the KDF of
the service, the user name and its create time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from raims_node.crypto.kdf import Kdf
from raims_node.crypto.keys import KeyPair, PublicKeys

USER_HMAC_LEN = 16
USER_HMAC_LABEL = b"raims-user-hmac-v1"


class Signer(Enum):
    USER = "user"
    SERVICE = "service"


@dataclass(frozen=True)
class PeerUser:
    """A user the service signed: its public keys and validity."""

    user: str
    create: str
    expires: str | None
    pub: PublicKeys


@dataclass(frozen=True)
class Credentials:
    kdf: Kdf = field(repr=False)
    svc: str
    svc_pub: PublicKeys = field(repr=False)
    user: str
    create: str
    expires: str | None
    signer: Signer
    signing_key: KeyPair = field(repr=False)
    users: Mapping[str, PeerUser] = field(default_factory=dict, repr=False)

    @property
    def user_hmac(self) -> bytes:
        return user_hmac(self.kdf, self.svc, self.user, self.create)


def user_hmac(kdf: Kdf, svc: str, user: str, create: str) -> bytes:
    return kdf.derive(USER_HMAC_LABEL, svc.encode(), user.encode(), create.encode(), length=USER_HMAC_LEN)
