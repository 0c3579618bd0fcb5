"""Watching a running worker from outside: Prometheus metrics and live OpenTelemetry
spans. Both are extras, imported only when configured."""
