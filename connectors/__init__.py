"""Everything that touches the outside: runners, executors, models, tools, Kafka, Flink."""
