"""The partitioner must match the Java client's default partitioner exactly."""

import pytest

from eddies.events import murmur2, partition_for

# Vectors from Apache Kafka's UtilsTest.testMurmur2 and librdkafka's rdmurmur2.c tests.
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"kafka": -798503068,
    b"1": -1993445489,
    b"12": 126087238,
    b"123": -267702483,
    b"1234": -1614185708,
    b"12345": -1188365604,
}

@pytest.mark.parametrize(("key", "expected"), sorted(JAVA_MURMUR2.items()))
def test_murmur2_matches_java(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_partition_is_java_to_positive_modulo() -> None:
    # Utils.toPositive(murmur2(key)) % n, computed independently here.
    for key, h in JAVA_MURMUR2.items():
        for n in (1, 3, 12, 64):
            assert partition_for(key, n) == (h & 0x7FFFFFFF) % n
    assert partition_for("21", 12) == partition_for(b"21", 12)


def test_bad_partition_count_is_an_error() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for("k", 0)
