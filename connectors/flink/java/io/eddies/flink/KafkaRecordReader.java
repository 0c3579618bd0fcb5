package io.eddies.flink;

import java.nio.charset.StandardCharsets;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.record.RecordBatch;

/**
 * Hands the whole Kafka record to Python: PyFlink's own deserializers are value-only, and the
 * session machine needs the key, position, timestamp and headers too.
 *
 * <p>Emits {@code Row(session key, record)}, the shape PyFlink's key_by gives a keyed Python
 * function, so the job keys by the first field in Java instead of running a Python operator
 * per record just to pick the key. The key is the record key as UTF-8 text ("" when null;
 * a malformed one is refused by admission later, wherever it lands). The record's fields: key
 * (byte[] or null), value (byte[] or null), partition (int), offset (long), timestamp (long,
 * -1 when the record has none), headers (byte[], see {@link HeaderCodec}).
 */
public final class KafkaRecordReader implements KafkaRecordDeserializationSchema<Row> {
    private static final long serialVersionUID = 1L;

    static final String[] FIELDS = {"key", "value", "partition", "offset", "timestamp", "headers"};

    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Row> out) {
        long timestamp = record.timestamp();
        Row row = Row.withPositions(FIELDS.length);
        row.setField(0, record.key());
        row.setField(1, record.value());
        row.setField(2, record.partition());
        row.setField(3, record.offset());
        row.setField(4, timestamp < 0 ? RecordBatch.NO_TIMESTAMP : timestamp);
        row.setField(5, HeaderCodec.encode(record.headers()));
        byte[] key = record.key();
        out.collect(Row.of(key == null ? "" : new String(key, StandardCharsets.UTF_8), row));
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return Types.ROW(
                Types.STRING,
                Types.ROW_NAMED(
                        FIELDS,
                        Types.PRIMITIVE_ARRAY(Types.BYTE),
                        Types.PRIMITIVE_ARRAY(Types.BYTE),
                        Types.INT,
                        Types.LONG,
                        Types.LONG,
                        Types.PRIMITIVE_ARRAY(Types.BYTE)));
    }
}
