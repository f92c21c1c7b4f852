"""How a filter maps a 32-bit subject/prefix hash to bit positions (the audit reproduces it).

A filter has a geometry: `size_bits` (M, 1 <= M <= 2**32), `seed` (32 bit) and
`num_hashes` (k). Hash function i (0 <= i < k) of hash h is

    seed_i   = (seed + i * 0x9E3779B9) mod 2**32
    x        = fmix32(h XOR seed_i)
    position = (x * M) >> 32                  (0 <= position < M)

where fmix32 is MurmurHash3's 32-bit finalizer, all arithmetic mod 2**32:

    x ^= x >> 16;  x *= 0x85EBCA6B;  x ^= x >> 13;  x *= 0xC2B2AE35;  x ^= x >> 16

The subject's hash set (see `hashing.py`) is computed once for all filters; each filter's
seed re-scrambles it, so `reseed` moves every entry (fmix32 is a bijection, so a new seed
gives every hash a new x; two hashes that collided on one seed collide on another only by
chance). `bit_positions` is the numpy kernel and `bit_positions_of` its scalar twin, used
by the filter and tested equal to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from raims_node.bloom.errors import InvalidGeometry

if TYPE_CHECKING:  # numpy is imported by the vectorized kernel only (ms_server's start, issue 23)
    import numpy as np
    import numpy.typing as npt

MASK32: Final = 0xFFFFFFFF
HASH_SEED_STEP: Final = 0x9E3779B9
FMIX_C1: Final = 0x85EBCA6B
FMIX_C2: Final = 0xC2B2AE35
MAX_SIZE_SHIFT: Final = 32
MAX_SIZE_BITS: Final = 1 << MAX_SIZE_SHIFT
MAX_NUM_HASHES: Final = 8


def check_geometry(size_bits: int, seed: int, num_hashes: int) -> None:
    if not 1 <= size_bits <= MAX_SIZE_BITS:
        raise InvalidGeometry(f"size of {size_bits} bits is outside 1..{MAX_SIZE_BITS}")
    if not 0 <= seed <= MASK32:
        raise InvalidGeometry(f"seed {seed} is outside 0..{MASK32}")
    if not 1 <= num_hashes <= MAX_NUM_HASHES:
        raise InvalidGeometry(f"{num_hashes} hash functions is outside 1..{MAX_NUM_HASHES}")


def hash_seeds(seed: int, num_hashes: int) -> tuple[int, ...]:
    return tuple((seed + i * HASH_SEED_STEP) & MASK32 for i in range(num_hashes))


def bit_position(h: int, seed_i: int, size_bits: int) -> int:
    x = h ^ seed_i
    x ^= x >> 16
    x = (x * FMIX_C1) & MASK32
    x ^= x >> 13
    x = (x * FMIX_C2) & MASK32
    x ^= x >> 16
    return (x * size_bits) >> 32


def bit_positions_of(size_bits: int, seed: int, num_hashes: int, h: int) -> tuple[int, ...]:
    """The k positions of one hash: the scalar twin of `bit_positions`."""
    return tuple(bit_position(h, s, size_bits) for s in hash_seeds(seed, num_hashes))


def bit_positions(
    size_bits: int, seed: int, num_hashes: int, hashes: npt.NDArray[np.uint32]
) -> npt.NDArray[np.uint64]:
    """Positions of many hashes, shape (len(hashes), num_hashes), dtype uint64."""
    import numpy as np

    check_geometry(size_bits, seed, num_hashes)
    h = np.asarray(hashes, dtype=np.uint32)
    seeds = np.array(hash_seeds(seed, num_hashes), dtype=np.uint32)
    # uint32 array arithmetic wraps mod 2**32, exactly as the scalar's & MASK32.
    x = h[:, None] ^ seeds[None, :]
    x ^= x >> np.uint32(16)
    x *= np.uint32(FMIX_C1)
    x ^= x >> np.uint32(13)
    x *= np.uint32(FMIX_C2)
    x ^= x >> np.uint32(16)
    return (x.astype(np.uint64) * np.uint64(size_bits)) >> np.uint64(32)
