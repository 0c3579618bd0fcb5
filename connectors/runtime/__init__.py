"""What both runners (the Kafka worker and the Flink job) share on the per-record path:
settings and topic names, the Kafka client helpers, preflight and group membership, the
door's checks (admission, signing), routing records to sessions, applying them, the sink,
dead letters, counters and JSON logs. Imports no runner."""
