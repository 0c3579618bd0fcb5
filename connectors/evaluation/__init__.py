"""Evaluating agents on cases: the cases (inputs, expected outputs), what a candidate did
with each (its output, cost, tokens, latency, calls), the scorers that judge it, and the
report that compares candidates with a baseline. Running candidates is a runner's part
(:mod:`eddies.connectors.local.evaluation`); ``eddies.eval`` is the public face."""
