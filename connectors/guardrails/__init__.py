"""Built-in guardrails: hooks (see :mod:`eddies.engine.hooks`) made from maintained
libraries, such as :class:`~eddies.connectors.guardrails.pii.PiiRedaction`."""
