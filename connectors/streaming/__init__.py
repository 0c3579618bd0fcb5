"""Streaming: a call's deltas and progress to ``APP.stream`` while it is made, and how a
reader follows them. Shared by every runner."""
