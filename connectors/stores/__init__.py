"""Vector stores: the embedded one (no server), with the filter language they share."""
