"""Looking at what sessions did: reading them back from the topics (sessions, replay),
one-line summaries, the session tree, field diffs, OpenTelemetry spans and the web view."""
