"""The Rai MS wire format: frame header, typed fields, system subjects, stream framing."""

from raims_node.wire.errors import (
    BadField,
    BadHeader,
    FrameTooLarge,
    StreamDesync,
    Truncated,
    WireError,
)
from raims_node.wire.fields import (
    FID_TYPES,
    DecodedField,
    Fid,
    Fields,
    FieldType,
    Message,
    Nested,
    decode_fields,
    decode_message_fields,
    decode_typed_fields,
    dump_id,
    encode_fields,
    encode_message_fields,
    fid_name,
    message_of,
)
from raims_node.wire.frame import (
    BRIDGE_LEN,
    DIGEST_LEN,
    DIGEST_OFFSET,
    Frame,
    Header,
    MsgType,
    Opt,
    decode_frame,
    encode_frame,
    frame_length,
    frame_with_body,
    path_opt,
    peek,
    peeked_fields,
    peeked_message,
    subject_hash,
)
from raims_node.wire.stream import MAX_FRAME, FrameReader

__all__ = [
    "BRIDGE_LEN", "DIGEST_LEN", "DIGEST_OFFSET", "FID_TYPES", "MAX_FRAME",
    "BadField", "BadHeader", "DecodedField", "FieldType", "Fid", "Fields", "Frame",
    "FrameReader", "FrameTooLarge", "Header", "Message", "MsgType", "Nested", "Opt", "StreamDesync", "Truncated",
    "WireError", "decode_fields", "decode_frame", "decode_message_fields", "decode_typed_fields",
    "dump_id", "encode_fields", "encode_frame", "encode_message_fields", "fid_name", "frame_length",
    "frame_with_body", "message_of", "path_opt", "peek", "peeked_fields", "peeked_message", "subject_hash",
]
