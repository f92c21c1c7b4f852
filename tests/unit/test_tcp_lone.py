"""Which link reads take the lone-frame path (transports/tcp.py, issue 24): a read that
is exactly one whole multicast data frame, with nothing buffered before it, goes to the
owner's `link_lone`; everything else goes through the frame reader to `link_frames`.
Also on an encrypted link, once the key exchange is done."""

from __future__ import annotations

import os

from raims_node.crypto.kdf import Kdf
from raims_node.crypto.link_cipher import LinkCipher
from raims_node.transports.tcp import LinkProtocol
from raims_node.wire import MsgType, encode_frame


class Owner:
    def __init__(self, lone: bool = True) -> None:
        self.calls: list[tuple[str, list[bytes]]] = []
        if lone:
            self.link_lone = lambda conn_id, frame: self.calls.append(("lone", [frame]))

    def link_made(self, link: LinkProtocol) -> int:
        return 1

    def link_frames(self, conn_id: int, frames: list[bytes]) -> None:
        self.calls.append(("frames", list(frames)))

    def link_lost(self, conn_id: int, reason: str) -> None:
        pass

    def link_congested(self, conn_id: int, congested: bool) -> None:
        pass

    def link_full(self, conn_id: int, full: bool) -> None:
        pass


MCAST = bytes(encode_frame(MsgType.MCAST, "a.b", bytes(16), []))
HEARTBEAT = bytes(encode_frame(MsgType.HEARTBEAT, "_X.HB", bytes(16), []))


def test_plaintext_reads_split_between_the_lone_and_the_general_path() -> None:
    owner = Owner()
    link = LinkProtocol(owner, 0, None)
    reads = [MCAST, MCAST, MCAST + MCAST, MCAST[:20], MCAST[20:], HEARTBEAT, MCAST + MCAST[:10], MCAST[10:]]
    for data in reads:
        link.data_received(data)
    assert owner.calls == [
        ("frames", [MCAST]),  # the first read is checked for a key exchange
        ("lone", [MCAST]),
        ("frames", [MCAST, MCAST]),
        ("frames", [MCAST]),  # completed from the reader's buffer
        ("frames", [HEARTBEAT]),
        ("frames", [MCAST]),
        ("frames", [MCAST]),  # the reader held a partial frame: not lone
    ]
    assert link.frames_in == 8 and link.bytes_in == sum(map(len, reads))


def test_an_owner_without_link_lone_gets_every_frame_through_link_frames() -> None:
    owner = Owner(lone=False)
    link = LinkProtocol(owner, 0, None)
    for _ in range(3):
        link.data_received(MCAST)
    assert owner.calls == [("frames", [MCAST])] * 3


def test_encrypted_lone_reads_after_the_key_exchange() -> None:
    kdf = Kdf(os.urandom(640))
    owner = Owner()
    link = LinkProtocol(owner, 0, kdf)
    peer = LinkCipher(kdf)
    assert link.cipher is not None
    peer.feed(link.cipher.hello)
    link.data_received(peer.hello + peer.encrypt(MCAST))  # hello and a frame in one read
    link.data_received(peer.encrypt(MCAST))
    link.data_received(peer.encrypt(MCAST + HEARTBEAT))
    garbled = bytearray(peer.encrypt(MCAST))
    garbled[30] ^= 1  # inside the digest: still one frame to the reader, the node's MAC check refuses it
    link.data_received(bytes(garbled))
    assert [kind for kind, _ in owner.calls] == ["frames", "lone", "frames", "lone"]
    assert owner.calls[1][1] == [MCAST] and owner.calls[2][1] == [MCAST, HEARTBEAT]
    assert owner.calls[3][1][0] != MCAST
