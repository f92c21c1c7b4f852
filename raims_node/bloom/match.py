"""Match one subject against many peer filters (routing, anycast, "show match").

Manual "Wildcard Matching": "The hash set is computed in groups before any routing based on
the entire set of hashes needed". Here the subject's `SubjectHashes` is built once (with
the frame header's hash when the caller has it) and shared by every filter; each filter
walks only its own cached tuple of prefix lengths in use, and a prefix hash computed for
one filter is reused from the hash set by every other filter using that length.
"""

from collections.abc import Sequence

from raims_node.bloom.filter import BloomFilter
from raims_node.bloom.hashing import SubjectHashes


def match_filters(
    subject: str | bytes | SubjectHashes, filters: Sequence[BloomFilter]
) -> list[int]:
    """Indexes of the filters that may match `subject` (never missing a real match)."""
    hs = subject if isinstance(subject, SubjectHashes) else SubjectHashes(subject)
    return [i for i, f in enumerate(filters) if f.might_match(hs)]
