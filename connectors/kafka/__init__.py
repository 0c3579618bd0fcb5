"""Kafka runtime: embedded broker, topics, the worker (orchestrator and executors).

Imports confluent-kafka lazily through these modules; ``import eddies`` never loads it.
"""
