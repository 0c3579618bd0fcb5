"""The Kafka worker: its roles (orchestrator and executors), ownership and fencing,
checkpoints, the journal, claims and liveness, and the embedded broker.

Imports confluent-kafka lazily through these modules; ``import eddies`` never loads it.
"""
