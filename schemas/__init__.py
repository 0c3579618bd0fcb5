"""The Avro schemas (``avro/*.avsc``): the wire contract of every Eddies event."""

from pathlib import Path

AVRO_DIR = Path(__file__).resolve().parent / "avro"
