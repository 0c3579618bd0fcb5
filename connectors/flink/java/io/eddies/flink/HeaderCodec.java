package io.eddies.flink;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * Kafka headers as one byte[] so they cross the Java/Python boundary as a single
 * PRIMITIVE_ARRAY(BYTE) field: PyFlink has no type for a list of (String, byte[]) pairs
 * that keeps a null value apart from an empty one.
 *
 * <p>Per header, in order: 4-byte big-endian name length, UTF-8 name, 4-byte big-endian value
 * length (-1 for a null value), value bytes.
 */
final class HeaderCodec {
    private static final byte[] EMPTY = new byte[0];

    private HeaderCodec() {}

    static byte[] encode(Iterable<Header> headers) {
        if (headers == null) {
            return EMPTY;
        }
        List<byte[]> names = new ArrayList<>();
        List<byte[]> values = new ArrayList<>();
        int size = 0;
        for (Header header : headers) {
            byte[] name = header.key().getBytes(StandardCharsets.UTF_8);
            byte[] value = header.value();
            names.add(name);
            values.add(value);
            size += 8 + name.length + (value == null ? 0 : value.length);
        }
        if (size == 0) {
            return EMPTY;
        }
        ByteBuffer out = ByteBuffer.allocate(size);
        for (int i = 0; i < names.size(); i++) {
            byte[] name = names.get(i);
            byte[] value = values.get(i);
            out.putInt(name.length).put(name);
            if (value == null) {
                out.putInt(-1);
            } else {
                out.putInt(value.length).put(value);
            }
        }
        return out.array();
    }

    static List<Header> decode(byte[] encoded) {
        List<Header> headers = new ArrayList<>();
        if (encoded == null) {
            return headers;
        }
        ByteBuffer in = ByteBuffer.wrap(encoded);
        while (in.hasRemaining()) {
            int nameLength = length(in, false);
            byte[] name = new byte[nameLength];
            in.get(name);
            int valueLength = length(in, true);
            byte[] value = null;
            if (valueLength >= 0) {
                value = new byte[valueLength];
                in.get(value);
            }
            headers.add(new RecordHeader(new String(name, StandardCharsets.UTF_8), value));
        }
        return headers;
    }

    private static int length(ByteBuffer in, boolean nullable) {
        if (in.remaining() < 4) {
            throw new IllegalArgumentException("encoded headers end inside a length prefix");
        }
        int length = in.getInt();
        if ((length < 0 && !(nullable && length == -1)) || length > in.remaining()) {
            throw new IllegalArgumentException(
                    "encoded headers hold a bad length " + length + " with " + in.remaining() + " bytes left");
        }
        return length;
    }
}
