"""The Avro schemas of ``schemas/avro``, parsed once, and their fingerprints."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from fastavro.schema import fingerprint, load_schema, to_parsing_canonical_form

ENVELOPE = "eddies.AgentEvent"


def avro_dir() -> Path:
    """Where the ``.avsc`` files are: the repository's ``schemas/avro`` or the installed copy."""
    from eddies.schemas import AVRO_DIR

    return AVRO_DIR


@functools.cache
def envelope_schema() -> Any:
    """The parsed ``AgentEvent`` schema (with every payload schema it references)."""
    return load_schema(str(avro_dir() / f"{ENVELOPE}.avsc"))


def load_envelope_from(directory: Path) -> Any:
    """Parse the envelope schema of another schema directory (e.g. a frozen old version)."""
    return load_schema(str(directory / f"{ENVELOPE}.avsc"), named_schemas={})


def schema_fingerprint(parsed: Any) -> str:
    """CRC-64-AVRO fingerprint (hex) of a schema's parsing canonical form."""
    return str(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))


@functools.cache
def envelope_fingerprint() -> str:
    """Fingerprint of the current envelope schema; written in every record's headers."""
    return schema_fingerprint(envelope_schema())
