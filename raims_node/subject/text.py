"""Subject text: the syntaxes, the length limit and the one str <-> bytes rule.

Manual "Subjects": "Any string of bytes can be subscribed or published". Subjects arrive
as bytes (Redis and sbus are binary safe) or as str (RV, NATS, the console). raims keeps
patterns and regular expressions in str and hashes bytes, so the two must convert without
loss: bytes decode as UTF-8 with `surrogateescape`, which maps every invalid byte to a lone
surrogate and back. Decoding then encoding returns the original bytes, and because UTF-8
encoding is a homomorphism of concatenation, a str prefix/suffix is a bytes prefix/suffix.
"""

from typing import Final, Literal

Syntax = Literal["rv", "glob", "sbus"]
SYNTAXES: Final[tuple[Syntax, ...]] = ("rv", "glob", "sbus")

# The wire frame carries the subject with a 16-bit length (manual "Subject: 2 byte type +
# 16 bit length + up to 64K").
MAX_SUBJECT_LEN: Final = 0xFFFF

_CODEC: Final = "utf-8"
_ERRORS: Final = "surrogateescape"


def subject_bytes(subject: str | bytes) -> bytes:
    """The bytes that are hashed and sent for `subject`."""
    if isinstance(subject, bytes):
        return subject
    return subject.encode(_CODEC, _ERRORS)


def subject_text(subject: str | bytes) -> str:
    """The str that patterns match against; `subject_bytes(subject_text(b)) == b`."""
    if isinstance(subject, str):
        return subject
    return subject.decode(_CODEC, _ERRORS)
