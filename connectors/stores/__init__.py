"""Vector stores: the embedded one (no server) and Postgres with pgvector, with the filter
language they share."""
