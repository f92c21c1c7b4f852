"""System subject classes, inbox subjects and publish types."""

import pytest

from raims_node.wire import MsgType
from raims_node.wire.subjects import (
    BadSubject,
    PublishType,
    bridge_b64,
    bridge_from_b64,
    inbox_subject,
    is_system,
    msg_type_of,
    parse_inbox,
    publish_type,
)


def test_manual_inbox_subject_round_trips() -> None:
    bridge = bridge_from_b64("duBVZZwXfwBVlYgGNUZQTw")
    assert inbox_subject(bridge, "auth") == "_I.duBVZZwXfwBVlYgGNUZQTw.auth"
    assert parse_inbox("_I.xq6vl+2HcoDxtt+7lC7dGQ.sync_req") == (
        bridge_from_b64("xq6vl+2HcoDxtt+7lC7dGQ"), "sync_req")
    assert bridge_b64(bridge) == "duBVZZwXfwBVlYgGNUZQTw"


@pytest.mark.parametrize("bad", ["_M.x", "_I.short.auth", "_I.duBVZZwXfwBVlYgGNUZQTw", "_I.!!BVZZwXfwBVlYgGNUZQTw.x"])
def test_bad_inbox_subjects(bad: str) -> None:
    with pytest.raises(BadSubject):
        parse_inbox(bad)


@pytest.mark.parametrize(("subject", "mtype"), [
    ("_I.duBVZZwXfwBVlYgGNUZQTw.ping", MsgType.INBOX), ("_X.HB", MsgType.HEARTBEAT),
    ("_Z.ADJ", MsgType.RTR_ALERT), ("_S.JOIN.a.b", MsgType.RTR_ALERT), ("_P.PSUB.a.>", MsgType.RTR_ALERT),
    ("_M.ping", MsgType.RTR_ALERT), ("_N.PEER.x", MsgType.MCAST), ("RSF.IBM", MsgType.MCAST),
    ("_INBOX.7F000001.x", MsgType.MCAST),
])
def test_message_type_follows_subject_class(subject: str, mtype: MsgType) -> None:
    assert msg_type_of(subject) == mtype


def test_publish_types() -> None:
    assert publish_type("_X.HELLO") == PublishType.U_SESSION_HELLO
    assert publish_type("_Z.BLM") == PublishType.U_BLOOM_FILTER
    assert publish_type("_S.LEAV.foo") == PublishType.U_SUB_LEAVE
    assert publish_type("_P.STOP.foo.*") == PublishType.U_PSUB_STOP
    assert publish_type("_I.duBVZZwXfwBVlYgGNUZQTw.adj_rpy") == PublishType.U_INBOX_ADJ_RPY
    assert publish_type("_I.duBVZZwXfwBVlYgGNUZQTw.17") == PublishType.U_INBOX
    assert publish_type("_M.sync") == PublishType.U_MCAST
    assert publish_type("foo.bar") == PublishType.MCAST_SUBJECT
    assert is_system("_Z.ADD") and not is_system("_INBOX.x")
