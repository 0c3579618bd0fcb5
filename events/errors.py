"""The two error types of the event layer: one for writing, one for reading."""


class EncodingError(ValueError):
    """A value cannot be written in Eddies' value encoding (JSON) or in Avro.

    The message names the offending field or type, e.g.
    ``EncodingError("InputEvent.input: bytes is not JSON-encodable")``.
    """


class DecodeError(ValueError):
    """Bytes are not a valid Eddies event.

    Raised for every kind of garbage (truncated, trailing bytes, bad union index, invalid
    JSON in a value field), never any other exception type, so callers such as the worker
    can route the record to the dead-letter topic with ``str(err)`` as the reason.
    """
