"""The journal topic (``APP.journal``, compacted): its records (claims of calls, epoch
markers, stamped snapshots, outcomes) and the fold that reads them back in order. The
worker writes it; the worker, replay and the web view read it."""
