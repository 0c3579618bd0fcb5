"""The librdkafka codes runtime/client.py names are confluent-kafka's own."""

from confluent_kafka import KafkaError

from eddies.connectors.runtime import client


def test_the_local_error_codes_are_the_librarys() -> None:
    assert client.PARTITION_EOF == KafkaError._PARTITION_EOF
    assert client.TRANSPORT == KafkaError._TRANSPORT
    assert client.ALL_BROKERS_DOWN == KafkaError._ALL_BROKERS_DOWN
