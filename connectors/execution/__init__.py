"""Performing durable calls, whichever runner asks: the call performer and its targets,
deadlines, requests held until due, recorded outcomes reused by fork and reprocess, and the
token budget a model call is fitted to."""
