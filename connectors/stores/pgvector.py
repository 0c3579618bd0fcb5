"""A vector store on a PostgreSQL server with the pgvector extension: what a fleet of
workers shares, and what a team already runs.

Each collection is a table ``PREFIX + COLLECTION`` (``id text PRIMARY KEY, content text,
metadata jsonb, embedding vector(N)``, ``N`` fixed by its first write) with an HNSW index
for cosine distance (up to 2,000 dimensions, pgvector's limit; wider ones are searched
exactly). A plain query walks that index (approximate, as every server-backed
store is); a query with metadata filters reads the matching rows exactly, so a filter
never hides a match the index would have skipped. The filters mean what they mean in the
embedded store (:mod:`eddies.connectors.stores.sql_filters`). Needs ``eddies[pgvector]``
(psycopg 3); the server needs ``CREATE EXTENSION vector`` once, which the store does if it
may. A server that cannot be reached, or a connection cut, is a ConnectionError: the call
is tried again, and a write again replaces what an interrupted one wrote. A collection
exists while its table does (made by an add or ``create_collection``, by this store or
another on the same server): a query, get, update or delete of another is a
CollectionNotFoundError naming it. Example::

    store = PgVectorStore(embedding_model="emb", collection="travel",
                          dsn="postgresql://eddies@db.internal/knowledge")
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store)
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from eddies.connectors.stores.filters import metadata_json
from eddies.connectors.stores.sql_filters import where
from eddies.engine.vector_stores import CollectionNotFoundError, ids_of

#: Postgres cuts identifiers to this many bytes; a longer table name would be a silent clash.
MAX_IDENTIFIER_BYTES = 63
#: pgvector's HNSW index takes vectors of at most this many dimensions (a 3072-dimension
#: embedding is searched exactly, without one).
MAX_INDEXED_DIMENSIONS = 2000


class PgVectorStore:
    """A VECTOR_STORE resource kept in Postgres (pgvector); ``dsn`` is a libpq connection
    string or URI, ``table_prefix`` starts every collection's table name."""

    def __init__(self, *, embedding_model: str, dsn: str, collection: str = "default",
                 table_prefix: str = "eddies_", connect_timeout: float = 10.0) -> None:
        self.embedding_model = embedding_model
        self.collection = collection
        self.dsn = dsn
        self.table_prefix = table_prefix
        self.connect_timeout = connect_timeout
        # Connections are opened when first needed (a replay never opens one) and reused,
        # one per call running at once; psycopg's own pool is a package more.
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._tables: set[str] = set()  # tables known to exist with their index
        self._seen: set[str] = set()  # tables known to exist (a read checks no more)

    # --- collections -------------------------------------------------------------------
    def collections(self) -> list[str]:
        """The collections that have a table."""
        with self._connection() as conn:
            rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                                ).fetchall()
        n = len(self.table_prefix)
        return sorted(name[n:] for (name,) in rows if name.startswith(self.table_prefix))

    def create_collection(self, name: str, dimensions: int | None = None) -> None:
        """Make collection ``name`` (idempotent). Its vectors' dimensions are fixed by
        ``dimensions`` or, without, by its first write."""
        with self._connection() as conn:
            self._ensure(conn, self._table(name), dimensions)

    def delete_collection(self, name: str) -> bool:
        """Drop collection ``name`` and its documents; whether it existed."""
        table = self._table(name)
        with self._connection() as conn:
            existed = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [_quoted(table)]).fetchone()
            conn.execute(f"DROP TABLE IF EXISTS {_quoted(table)}")
        self._forget(table)
        return bool(existed and existed[0])

    def count(self, collection: str | None = None) -> int:
        """How many documents ``collection`` holds (0 if it does not exist)."""
        try:
            rows = self._read(collection or self.collection, "SELECT count(*) FROM {t}", [])
        except CollectionNotFoundError:
            return 0
        return int(rows[0][0]) if rows else 0

    # --- documents ---------------------------------------------------------------------
    def add(self, collection: str, documents: Sequence[Mapping[str, Any]], vectors: Any) -> list[str]:
        """Add (or replace, by id) ``documents`` (``{"id", "content", "metadata"}``, each
        with an id) with their ``vectors``; their ids."""
        rows = _rows(documents, vectors)
        if rows:
            self._write(collection, len(rows[0][3]), (
                "INSERT INTO {t} (id, content, metadata, embedding) "
                "VALUES (%s, %s, %s::jsonb, %s::vector) ON CONFLICT (id) DO UPDATE SET "
                "content = excluded.content, metadata = excluded.metadata, "
                "embedding = excluded.embedding"), [_params(r) for r in rows])
        return [r[0] for r in rows]

    def update(self, collection: str, documents: Sequence[Mapping[str, Any]], vectors: Any) -> int:
        """Replace the documents of these ids that exist; how many."""
        rows = _rows(documents, vectors)
        self._must_exist(collection)
        if not rows:
            return 0
        return self._write(collection, len(rows[0][3]), (
            "UPDATE {t} SET content = %s, metadata = %s::jsonb, embedding = %s::vector "
            "WHERE id = %s"), [[*_params(r)[1:], r[0]] for r in rows])

    def query(self, collection: str, vector: Sequence[float], limit: int = 5,
              filters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The ``limit`` documents nearest to ``vector`` that match ``filters``, nearest
        first, each with its cosine similarity as ``score``."""
        cond, params = where({} if filters is None else filters)
        literal = _vector(vector)
        # ORDER BY the distance alone: pgvector walks its index only for that order.
        sql = ("SELECT id, content, metadata, 1 - (embedding <=> %s::vector) FROM {t} "
               f"WHERE {cond} ORDER BY embedding <=> %s::vector LIMIT %s")
        # With filters, the exact scan: an HNSW walk filters after it found its candidates,
        # and may return fewer than ``limit`` though more match.
        setup = "SET LOCAL enable_indexscan = off" if filters else None
        rows = self._read(collection, sql, [literal, *params, literal, limit], setup)
        return [_document(r, round(float(r[3]), 6)) for r in rows]

    def get(self, collection: str, ids: str | Iterable[str] | None = None,
            filters: Mapping[str, Any] | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The documents of ``ids`` (one id, or a list; those that exist, in that order),
        else those that match ``filters`` (all without), oldest first, at most ``limit``."""
        cond, params = where({} if filters is None else filters)
        ids = ids_of(ids)
        if ids is not None:
            rows = self._read(collection, f"SELECT id, content, metadata FROM {{t}} WHERE id = ANY(%s) "
                              f"AND {cond}", [list(ids), *params])
            found = {r[0]: r for r in rows}
            ordered = [found[i] for i in dict.fromkeys(ids) if i in found]
            return [_document(r) for r in ordered[:limit]]
        rows = self._read(collection, f"SELECT id, content, metadata FROM {{t}} WHERE {cond} "
                          "ORDER BY seq LIMIT %s", [*params, limit])
        return [_document(r) for r in rows]

    def delete(self, collection: str, ids: str | Iterable[str] | None = None,
               filters: Mapping[str, Any] | None = None) -> int:
        """Delete the documents of ``ids`` (one id, or a list), or those that match
        ``filters``; how many."""
        cond, params = where({} if filters is None else filters)  # checked before the server is asked
        ids = ids_of(ids)
        self._must_exist(collection)
        chosen = "TRUE" if ids is None else "id = ANY(%s)"
        args = params if ids is None else [list(ids), *params]
        table = self._table(collection)
        try:
            with self._connection() as conn:
                return int(conn.execute(f"DELETE FROM {_quoted(table)} WHERE {chosen} AND {cond}",
                                        args).rowcount)
        except _psycopg().errors.UndefinedTable:  # dropped by another process since
            self._forget(table)
            raise self._not_found(collection) from None

    # --- the server --------------------------------------------------------------------
    def close(self) -> None:
        """Close the idle connections (the store opens new ones when asked again)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _table(self, collection: str) -> str:
        table = self.table_prefix + collection
        if not collection or len(table.encode()) > MAX_IDENTIFIER_BYTES or "\x00" in table:
            raise ValueError(f"collection {collection!r}: its table {table!r} must have 1 to "
                             f"{MAX_IDENTIFIER_BYTES} bytes")
        return table

    def _forget(self, table: str) -> None:
        """``table`` was dropped (by us or another process): ask the server next time."""
        self._tables.discard(table)
        self._seen.discard(table)

    def _exists(self, collection: str) -> bool:
        table = self._table(collection)
        if table in self._tables or table in self._seen:
            return True
        with self._connection() as conn:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [_quoted(table)]).fetchone()
        if row and row[0]:
            self._seen.add(table)
            return True
        return False

    def _must_exist(self, collection: str) -> None:
        if not self._exists(collection):
            raise self._not_found(collection)

    def _not_found(self, collection: str) -> CollectionNotFoundError:
        """The error for ``collection``, naming the collections there are if the server says."""
        try:
            known: list[str] | None = self.collections()
        except Exception:  # the error names the collection anyway; the others are a help
            known = None
        return CollectionNotFoundError(collection, known)

    def _read(self, collection: str, sql: str, params: list[Any],
              setup: str | None = None) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` (``{t}`` the collection's table); CollectionNotFoundError if it
        has no table."""
        table = self._table(collection)
        self._must_exist(collection)
        try:
            with self._connection() as conn, conn.transaction():
                if setup:
                    conn.execute(setup)
                return list(conn.execute(sql.replace("{t}", _quoted(table)), params).fetchall())
        except _psycopg().errors.UndefinedTable:  # dropped by another process since
            self._forget(table)
            raise self._not_found(collection) from None

    def _write(self, collection: str, dimensions: int, sql: str, rows: list[list[Any]]) -> int:
        table = self._table(collection)
        errors = _psycopg().errors
        for attempt in (1, 2):
            try:
                with self._connection() as conn:
                    if table not in self._tables:
                        self._ensure(conn, table, dimensions)
                    with conn.transaction(), conn.cursor() as cur:
                        cur.executemany(sql.replace("{t}", _quoted(table)), rows)
                        return int(cur.rowcount) if cur.rowcount >= 0 else len(rows)
            except errors.UndefinedTable:  # dropped by another process since we made it
                self._forget(table)
                if attempt == 2:
                    raise
            except errors.DataException as err:  # a vector of other dimensions, say
                raise ValueError(f"{table}: {err}") from None
        raise AssertionError("unreachable")

    def _ensure(self, conn: Any, table: str, dimensions: int | None) -> None:
        """Make ``table`` if it is missing; give its vectors ``dimensions`` if they have none."""
        quoted = _quoted(table)
        with conn.transaction():
            # One maker at a time: CREATE ... IF NOT EXISTS races with itself in Postgres.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [table])
            typed = f"vector({int(dimensions)})" if dimensions else "vector"
            conn.execute(f"CREATE TABLE IF NOT EXISTS {quoted} (id text PRIMARY KEY, "
                         f"content text NOT NULL, metadata jsonb NOT NULL DEFAULT '{{}}', "
                         f"embedding {typed} NOT NULL, seq bigserial)")
            row = conn.execute("SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass "
                               "AND attname = 'embedding'", [quoted]).fetchone()
            if row and row[0] < 0 and dimensions:  # made before any vector fixed its size
                conn.execute(f"ALTER TABLE {quoted} ALTER COLUMN embedding TYPE {typed}")
                row = (dimensions,)
            if row and row[0] > 0:
                if row[0] <= MAX_INDEXED_DIMENSIONS:  # wider vectors: exact scans, no index
                    index = _quoted(f"{table[:MAX_IDENTIFIER_BYTES - 5]}_hnsw")
                    conn.execute(f"CREATE INDEX IF NOT EXISTS {index} ON {quoted} "
                                 "USING hnsw (embedding vector_cosine_ops)")
                self._tables.add(table)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        psycopg = _psycopg()
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None or conn.closed:
            conn = self._connect(psycopg)
        try:
            yield conn
        except psycopg.OperationalError as err:
            conn.close()  # a cut connection is not given to the next call
            raise ConnectionError(f"postgres: {err}".strip()) from err
        except BaseException:
            self._release(conn)
            raise
        else:
            self._release(conn)

    def _release(self, conn: Any) -> None:
        if conn.closed:
            return
        with self._lock:
            self._idle.append(conn)

    def _connect(self, psycopg: Any) -> Any:
        try:
            conn = psycopg.connect(self.dsn, autocommit=True,
                                   connect_timeout=max(1, round(self.connect_timeout)))
        except psycopg.OperationalError as err:
            raise ConnectionError(f"postgres: {err}".strip()) from err
        if not conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.errors.UniqueViolation:
                pass  # another connection made it at the same moment (IF NOT EXISTS races)
            except psycopg.Error as err:
                conn.close()
                raise RuntimeError(f"postgres: the pgvector extension is not installed in this "
                                   f"database and could not be made: {err}") from None
        return conn


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ImportError("PgVectorStore needs psycopg: pip install 'eddies[pgvector]'") from None
    return psycopg


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _vector(values: Any) -> str:
    return "[" + ",".join(repr(float(x)) for x in values) + "]"


def _rows(documents: Sequence[Mapping[str, Any]], vectors: Any) -> list[tuple[str, str, str, Any]]:
    vectors = list(vectors)
    if len(vectors) != len(documents):
        raise ValueError(f"{len(documents)} documents with {len(vectors)} vectors")
    rows = []
    for doc, vec in zip(documents, vectors, strict=True):
        meta = metadata_json(dict(doc.get("metadata") or {}))
        rows.append((str(doc["id"]), str(doc["content"]), meta, list(vec)))
    return rows


def _params(row: tuple[str, str, str, Any]) -> list[Any]:
    return [row[0], row[1], row[2], _vector(row[3])]


def _document(row: tuple[Any, ...], score: float | None = None) -> dict[str, Any]:
    return {"id": row[0], "content": row[1], "metadata": dict(row[2] or {}), "score": score}


__all__ = ["PgVectorStore"]
