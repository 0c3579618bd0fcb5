"""Kafka's default partitioner for keyed records, identical to the Java client's.

Java: ``Utils.toPositive(Utils.murmur2(keyBytes)) % numPartitions``; librdkafka's
``murmur2_random`` partitioner is the same. Every Eddies topic is keyed by session id
and co-partitioned with it, so a Java, Flink or Python producer puts a session on the
same partition.

Example::

    >>> murmur2(b"21")
    -973932308
    >>> partition_for("21", 12)
    0
"""

import functools
import struct

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<I").iter_unpack


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data`` as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end = length - (length & 3)
    for (k,) in _WORDS(data[:end]):  # little-endian 32-bit words: half the cost of indexing
        k = (k * _M) & _MASK
        k ^= k >> 24
        h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


@functools.lru_cache(maxsize=65536)  # murmur2 in Python costs ~5 us; a worker asks often
def partition_for(key: str | bytes, num_partitions: int) -> int:
    """The partition the Java client's default partitioner picks for ``key``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    raw = key.encode("utf-8") if isinstance(key, str) else key
    return (murmur2(raw) & 0x7FFFFFFF) % num_partitions
