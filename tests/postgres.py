"""A real PostgreSQL server with pgvector for the tests that need one.

``EDDIES_TEST_POSTGRES`` names a server to use (a DSN whose database has, or may create,
the vector extension); otherwise the tests start one from the ``pgserver`` package (a
PostgreSQL 16 build with pgvector in its wheel, from the dev extra), in a temporary folder,
and stop it at the end. Where neither is there (pgserver has no wheel for this Python), the
tests skip and say why.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The DSN of a database with pgvector, for this test run."""
    given = os.environ.get("EDDIES_TEST_POSTGRES")
    if given:
        yield given
        return
    folder = tempfile.mkdtemp(prefix="eddies-pg-")
    with warnings.catch_warnings():  # XDG_RUNTIME_DIR unset: platformdirs falls back, and says so
        warnings.simplefilter("ignore")
        try:
            import pgserver
            import psycopg  # noqa: F401
        except ImportError as err:
            pytest.skip(f"no PostgreSQL to test against ({err.name} is not installed here, and "
                        "EDDIES_TEST_POSTGRES names no server)")
        # pgserver starts postgres as an unprivileged user of its own when run as root, and
        # stops it when the last handle closes.
        server = pgserver.get_server(folder, cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


__all__ = ["postgres_dsn"]
