package io.eddies.flink;

import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.types.Row;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Turns a Row built in Python into a ProducerRecord: PyFlink's sink serializers cannot set
 * headers, an explicit partition or a key per record.
 *
 * <p>Row fields: topic (String), partition (int; negative lets the producer's partitioner
 * choose), key (byte[] or null), value (byte[] or null, null is a tombstone), headers (byte[]
 * or null, see {@link HeaderCodec}), timestamp (long; negative lets the producer stamp it).
 */
public final class KafkaRecordWriter implements KafkaRecordSerializationSchema<Row> {
    private static final long serialVersionUID = 1L;

    static final String[] FIELDS = {"topic", "partition", "key", "value", "headers", "timestamp"};

    @Override
    public ProducerRecord<byte[], byte[]> serialize(Row row, KafkaSinkContext context, Long timestamp) {
        String topic = (String) field(row, 0);
        if (topic == null || topic.isEmpty()) {
            throw new IllegalArgumentException("a row for the Kafka sink has no topic: " + row);
        }
        Integer partition = (Integer) field(row, 1);
        Long stamp = (Long) field(row, 5);
        return new ProducerRecord<>(
                topic,
                partition == null || partition < 0 ? null : partition,
                stamp == null || stamp < 0 ? null : stamp,
                (byte[]) field(row, 2),
                (byte[]) field(row, 3),
                HeaderCodec.decode((byte[]) field(row, 4)));
    }

    /** Rows reach us by position or by name depending on how they were made; accept both. */
    private static Object field(Row row, int position) {
        if (row.getArity() <= position) {
            throw new IllegalArgumentException(
                    "a row for the Kafka sink needs " + FIELDS.length + " fields, got " + row.getArity());
        }
        try {
            return row.getField(position);
        } catch (IllegalArgumentException byNameOnly) {
            return row.getField(FIELDS[position]);
        }
    }
}
