package io.eddies.flink;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * Splits what the session machine wrote for one input record (its events, requests, outputs
 * and journal records: often eight or more) into rows for {@link KafkaRecordWriter}. Each
 * element crossing from Python to Java costs more than its bytes, so Python hands over one
 * batch per input record.
 *
 * <p>A batch is records one after another, each: topic (int length, UTF-8), partition (int;
 * negative: by key), key (int length, -1 for null, bytes), value (same), headers (int length,
 * {@link HeaderCodec} bytes), timestamp (long; negative: none). Big-endian.
 */
public final class OutputBatch implements FlatMapFunction<byte[], Row>, ResultTypeQueryable<Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public void flatMap(byte[] batch, Collector<Row> out) {
        ByteBuffer in = ByteBuffer.wrap(batch);
        while (in.hasRemaining()) {
            String topic = new String(bytes(in, false), StandardCharsets.UTF_8);
            int partition = in.getInt();
            byte[] key = bytes(in, true);
            byte[] value = bytes(in, true);
            byte[] headers = bytes(in, false);
            long timestamp = in.getLong();
            out.collect(Row.of(topic, partition, key, value, headers, timestamp));
        }
    }

    private static byte[] bytes(ByteBuffer in, boolean nullable) {
        int n = in.getInt();
        if (n < 0) {
            if (!nullable) {
                throw new IllegalArgumentException("a batch field that cannot be null has length " + n);
            }
            return null;
        }
        byte[] b = new byte[n];
        in.get(b);
        return b;
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return Types.ROW_NAMED(
                KafkaRecordWriter.FIELDS,
                Types.STRING,
                Types.INT,
                Types.PRIMITIVE_ARRAY(Types.BYTE),
                Types.PRIMITIVE_ARRAY(Types.BYTE),
                Types.PRIMITIVE_ARRAY(Types.BYTE),
                Types.LONG);
    }
}
