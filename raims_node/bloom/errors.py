"""Errors raised by the bloom package (filters, their geometry, shards and the codec)."""

from raims_node import RaimsError


class BloomError(RaimsError):
    """Root of the bloom package's errors."""


class InvalidGeometry(BloomError):
    """A filter size, seed or number of hash functions outside its limits."""


class InvalidShard(BloomError):
    """A shard k of n with k or n outside 1 <= k <= n <= MAX_SHARDS."""


class NotInFilter(BloomError):
    """Removal of a subject or pattern that the filter does not hold."""


class ReplicaError(BloomError):
    """An operation that needs the subscriptions themselves (resize, reseed) on a filter
    decoded from bytes, which holds only bit positions and hashes."""


class GeometryMismatch(BloomError):
    """A union of replica filters whose size, seed or number of hash functions differ."""


class BloomDecodeError(BloomError):
    """Bytes that are not a valid serialized filter; the message names the field and offset."""
