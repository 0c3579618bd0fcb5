package io.eddies.flink;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.types.Row;

/**
 * Keeps the rows for {@link KafkaRecordWriter} whose topic is one of the given topics (or, with
 * {@code keep} false, those whose topic is not): the job writes the records the next hop waits
 * for (requests, outputs) through a sink of their own that lingers less than the one for the
 * history and the journal.
 */
public final class TopicFilter implements FilterFunction<Row> {
    private static final long serialVersionUID = 1L;

    private final Set<String> topics;
    private final boolean keep;

    /** {@code topics}: comma-separated (a Kafka topic name holds no comma). */
    public TopicFilter(String topics, boolean keep) {
        this.topics = new HashSet<>(Arrays.asList(topics.split(",")));
        this.keep = keep;
    }

    @Override
    public boolean filter(Row row) {
        return topics.contains((String) row.getField(0)) == keep;
    }
}
