"""The Flink runner: the session machine as a PyFlink job on keyed state."""
