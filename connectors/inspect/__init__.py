"""Looking at what sessions did: one-line summaries, the session tree, field diffs,
OpenTelemetry spans and the web view. Pure over recorded events, except the exporters."""
