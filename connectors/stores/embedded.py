"""The embedded vector store: no server, exact search, in the worker's process.

Each collection holds its documents' unit vectors in one numpy matrix: a query is one
matrix-vector product and a partial sort (exact cosine similarity), after its filters
chose the documents whose metadata matches: an index of each metadata key's values gives
the rows an equality (``$eq``, ``$in``, a plain value) allows, and only those are checked;
a filter of orders or nulls alone checks every document's metadata. Queries that arrive
while the store is busy (a worker's call threads) are answered together, by one matrix
product for those without filters. With
``path``, every change is appended to ``PATH/COLLECTION.jsonl`` (the vectors as base64
float32) and a store opened on the same path reads them back; without, it lives in
memory. One process writes a path: for a fleet of workers that share documents, use a
server-backed store. A collection exists once an add or ``create_collection`` made it (or
its file is there) and until ``delete_collection``: a query, get, update or delete of
another is a CollectionNotFoundError naming it. Example::

    store = EmbeddedVectorStore(embedding_model="emb", collection="travel", path="/var/lib/docs")
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store)
    store.query("travel", vector, limit=3, filters={"city": "Lisbon"})   # direct, not durable
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eddies.connectors.stores.filters import check, matches, metadata_json
from eddies.engine.vector_stores import CollectionNotFoundError, ids_of


def _token(value: Any) -> tuple[Any, ...] | None:
    """A metadata value as the metadata index keys it (JSON's equality: a boolean is not a
    number, 1 is 1.0), or None for one it does not index (null, a list, an object)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", float(value))
    if isinstance(value, str):
        return ("s", value)
    return None


# Queries answered by one matrix product at most: (documents x _BATCH) float32 scores.
_BATCH = 16


@dataclass(eq=False)
class _Ask:
    """One query waiting for its answer (see EmbeddedVectorStore.query)."""

    collection: str
    vector: Any  # a unit vector
    limit: int
    filters: Mapping[str, Any] | None
    documents: list[dict[str, Any]] = field(default_factory=list)
    error: Exception | None = None
    done: bool = False


class _Collection:
    """One collection's documents: ids, contents, metadata, their vectors' matrix, and an
    index of the rows holding each metadata key's each value."""

    def __init__(self, np: Any) -> None:
        self.np = np
        self.ids: list[str] = []
        self.contents: list[str] = []
        self.metadata: list[dict[str, Any]] = []
        self.rows: dict[str, int] = {}
        self.matrix: Any = None  # (capacity, dims) float32; the first len(ids) rows used
        self.index: dict[str, dict[tuple[Any, ...], set[int]]] = {}

    def _indexed(self, row: int, meta: Mapping[str, Any], add: bool) -> None:
        for key, value in meta.items():
            token = _token(value)
            if token is None:
                continue
            rows = self.index.setdefault(key, {}).setdefault(token, set())
            if add:
                rows.add(row)
            else:
                rows.discard(row)

    def upsert(self, ids: Sequence[str], contents: Sequence[str],
               metadata: Sequence[Mapping[str, Any]], vectors: Any) -> None:
        np = self.np
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1, norms)
        if self.matrix is None:
            self.matrix = np.zeros((max(16, len(ids)), vectors.shape[1]), dtype=np.float32)
        elif vectors.shape[1] != self.matrix.shape[1]:
            raise ValueError(f"vectors of {vectors.shape[1]} dimensions for a collection of "
                             f"{self.matrix.shape[1]}")
        for i, doc_id in enumerate(ids):
            row = self.rows.get(doc_id)
            if row is None:
                row = len(self.ids)
                if row == len(self.matrix):  # grown by half: appends stay amortised O(1)
                    grown = np.zeros((row + row // 2 + 1, self.matrix.shape[1]), dtype=np.float32)
                    grown[:row] = self.matrix
                    self.matrix = grown
                self.rows[doc_id] = row
                self.ids.append(doc_id)
                self.contents.append(contents[i])
                self.metadata.append(dict(metadata[i]))
            else:
                self._indexed(row, self.metadata[row], add=False)
                self.contents[row] = contents[i]
                self.metadata[row] = dict(metadata[i])
            self._indexed(row, self.metadata[row], add=True)
            self.matrix[row] = vectors[i]

    def remove(self, ids: Iterable[str]) -> int:
        removed = 0
        for doc_id in ids:
            row = self.rows.pop(doc_id, None)
            if row is None:
                continue
            self._indexed(row, self.metadata[row], add=False)
            last = len(self.ids) - 1
            if row != last:  # the last row takes the removed one's place
                moved = self.ids[last]
                self._indexed(last, self.metadata[last], add=False)
                self.ids[row], self.contents[row], self.metadata[row] = (
                    moved, self.contents[last], self.metadata[last])
                self.matrix[row] = self.matrix[last]
                self.rows[moved] = row
                self._indexed(row, self.metadata[row], add=True)
            self.ids.pop()
            self.contents.pop()
            self.metadata.pop()
            removed += 1
        return removed

    def document(self, row: int, score: float | None = None) -> dict[str, Any]:
        return {"id": self.ids[row], "content": self.contents[row],
                "metadata": dict(self.metadata[row]), "score": score}

    def check_dimensions(self, vector: Any, name: str) -> None:
        """A ValueError unless ``vector`` has this collection's dimensions."""
        if vector.shape != (self.matrix.shape[1],):
            raise ValueError(f"a query vector of shape {vector.shape} for collection {name!r} "
                             f"of {self.matrix.shape[1]} dimensions")

    def nearest(self, vectors: Sequence[Any], limits: Sequence[int]) -> list[list[dict[str, Any]]]:
        """For each unit vector, its ``limit`` nearest documents, nearest first: one
        matrix-vector product for one vector, one matrix product for several."""
        np = self.np
        matrix = self.matrix[: len(self.ids)]
        if len(vectors) == 1:
            scores = (matrix @ vectors[0])[None, :]
        else:
            scores = np.ascontiguousarray((matrix @ np.stack(vectors).T).T)
        return [self._top(row_scores, limit, None) for row_scores, limit in zip(scores, limits, strict=True)]

    def nearest_matching(self, vector: Any, limit: int, filters: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The ``limit`` documents nearest to ``vector`` that match ``filters``."""
        rows = self.np.asarray(self.selected(filters), dtype=self.np.int64)
        if not len(rows):
            return []
        return self._top(self.matrix[rows] @ vector, limit, rows)

    def _top(self, scores: Any, limit: int, rows: Any) -> list[dict[str, Any]]:
        np = self.np
        k = min(limit, len(scores))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [self.document(int(i if rows is None else rows[i]), round(float(scores[i]), 6)) for i in top]

    def selected(self, filters: Mapping[str, Any]) -> list[int]:
        """The rows whose metadata match ``filters``, in row order: those the index says
        may match, checked; every row, checked, when the filters name no indexed value."""
        narrowed = self.candidates(filters)
        if narrowed is None:
            return [row for row, meta in enumerate(self.metadata) if matches(meta, filters)]
        meta = self.metadata
        return [row for row in sorted(narrowed) if matches(meta[row], filters)]

    def candidates(self, filters: Mapping[str, Any]) -> set[int] | None:
        """A superset of the rows that match ``filters`` from the index, or None when it
        cannot narrow them (a filter of an order, of a null, of a list)."""
        found: set[int] | None = None
        for key, value in filters.items():
            if key in ("$and", "$or"):
                parts = [self.candidates(part) for part in value]
                known = [p for p in parts if p is not None]
                part: set[int] | None
                if key == "$or":  # narrows only if every branch does
                    part = set[int]().union(*known) if len(known) == len(parts) else None
                else:
                    part = set.intersection(*known) if known else None
            elif isinstance(value, Mapping):
                part = self._equal(key, value)
            else:
                part = self._equal(key, {"$eq": value})
            if part is not None:
                found = part if found is None else found & part
        return found

    def _equal(self, key: str, ops: Mapping[str, Any]) -> set[int] | None:
        """The rows ``$eq`` or ``$in`` of ``ops`` allow (None if neither narrows)."""
        values = [ops["$eq"]] if "$eq" in ops else ops.get("$in")
        if values is None:
            return None
        tokens = [_token(v) for v in values]
        if any(t is None for t in tokens):
            return None
        by_value = self.index.get(key, {})
        return set[int]().union(*(by_value.get(t, set()) for t in tokens if t is not None))


class EmbeddedVectorStore:
    """A VECTOR_STORE resource kept in this process (and, with ``path``, in files there);
    ``embedding_model`` names the EMBEDDING_MODEL resource that embeds its texts,
    ``collection`` the collection an operation that names none uses."""

    def __init__(self, *, embedding_model: str, collection: str = "default",
                 path: str | os.PathLike[str] | None = None) -> None:
        import numpy as np

        self.embedding_model = embedding_model
        self.collection = collection
        self.path = None if path is None else Path(path)
        self._np = np
        # One operation at a time, queries too: a query is a matrix-vector product bound by
        # memory bandwidth, on every core BLAS has; queries side by side on a worker's call
        # threads measured 3x slower than one after another (bench/retrieval.py). Queries
        # that wait meanwhile are answered together, by one matrix product that reads the
        # matrix once for them all (group commit, for reads).
        self._lock = threading.Lock()
        self._asking = threading.Lock()  # guards _asked alone, never held while computing
        self._asked: list[_Ask] = []
        self._collections: dict[str, _Collection] = {}
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            for log in sorted(self.path.glob("*.jsonl")):
                self._read_log(log.stem, log)

    # --- collections -------------------------------------------------------------------
    def collections(self) -> list[str]:
        """The collections that hold documents (or were made)."""
        with self._lock:
            return sorted(self._collections)

    def create_collection(self, name: str) -> None:
        """Make collection ``name`` (idempotent; an add to a new name makes it too)."""
        with self._lock:
            self._get(name)
            if self.path is not None:  # so that a store opened on the path has it too
                (self.path / f"{name}.jsonl").touch()

    def delete_collection(self, name: str) -> bool:
        """Drop collection ``name`` and its documents; whether it existed."""
        with self._lock:
            existed = self._collections.pop(name, None) is not None
            if self.path is not None:
                (self.path / f"{name}.jsonl").unlink(missing_ok=True)
            return existed

    def count(self, collection: str | None = None) -> int:
        """How many documents ``collection`` holds."""
        with self._lock:
            col = self._collections.get(collection or self.collection)
            return 0 if col is None else len(col.ids)

    # --- documents ---------------------------------------------------------------------
    def add(self, collection: str, documents: Sequence[Mapping[str, Any]], vectors: Any) -> list[str]:
        """Add (or replace, by id) ``documents`` (``{"id", "content", "metadata"}``, each
        with an id) with their ``vectors``; their ids."""
        if not documents:  # nothing to write, and no vectors to fix the dimensions
            return []
        with self._lock:
            return self._write(collection, documents, vectors)

    def update(self, collection: str, documents: Sequence[Mapping[str, Any]], vectors: Any) -> int:
        """Replace the documents of these ids that exist; how many."""
        with self._lock:
            col = self._existing(collection)
            keep = [i for i, d in enumerate(documents) if str(d["id"]) in col.rows]
            if keep:
                self._write(collection, [documents[i] for i in keep], self._np.asarray(vectors)[keep])
            return len(keep)

    def query(self, collection: str, vector: Sequence[float], limit: int = 5,
              filters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The ``limit`` documents nearest to ``vector`` that match ``filters``, nearest
        first, each with its cosine similarity as ``score``."""
        np = self._np
        if filters is not None:
            check(filters)
        q = np.asarray(vector, dtype=np.float32)
        ask = _Ask(collection, q / (np.linalg.norm(q) or 1.0), limit, filters or None)
        with self._asking:
            self._asked.append(ask)
        with self._lock:
            if not ask.done:  # no query before ours took it along: ours takes those waiting
                with self._asking:
                    batch, self._asked = self._asked, []
                self._answer(batch)
        if ask.error is not None:
            raise ask.error
        return ask.documents

    def _answer(self, batch: list[_Ask]) -> None:
        """Answer the queries of ``batch`` (under the lock): those without filters on one
        collection by one matrix product, which reads the matrix once for them all."""
        by_collection: dict[str, list[_Ask]] = {}
        for ask in batch:
            by_collection.setdefault(ask.collection, []).append(ask)
        try:
            for name, asks in by_collection.items():
                col = self._collections.get(name)
                plain: list[_Ask] = []
                for ask in asks:
                    try:
                        if col is None:
                            raise CollectionNotFoundError(name, self._collections)
                        if not col.ids:
                            ask.documents = []
                        else:
                            col.check_dimensions(ask.vector, name)
                            if not ask.filters:
                                plain.append(ask)
                                continue
                            ask.documents = col.nearest_matching(ask.vector, ask.limit, ask.filters)
                    except Exception as err:  # raised again in the thread that asked
                        ask.error = err
                    ask.done = True
                if col is not None:
                    self._answer_together(col, plain)
        finally:  # interrupted: every query left gets an error, so none returns nothing
            for ask in batch:
                if not ask.done:
                    ask.error, ask.done = RuntimeError("the embedded store was interrupted"), True

    @staticmethod
    def _answer_together(col: _Collection, asks: list[_Ask]) -> None:
        """Answer ``asks`` (no filters, on ``col``) by matrix products of _BATCH at most."""
        for start in range(0, len(asks), _BATCH):
            chunk = asks[start:start + _BATCH]
            try:
                answers = col.nearest([a.vector for a in chunk], [a.limit for a in chunk])
            except Exception as err:  # raised again in each thread that asked
                for ask in chunk:
                    ask.error, ask.done = err, True
                continue
            for ask, documents in zip(chunk, answers, strict=True):
                ask.documents, ask.done = documents, True

    def get(self, collection: str, ids: str | Iterable[str] | None = None,
            filters: Mapping[str, Any] | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The documents of ``ids`` (one id, or a list; those that exist, in that order),
        else those that match ``filters`` (all without), at most ``limit``."""
        if filters is not None:
            check(filters)
        ids = ids_of(ids)
        with self._lock:
            col = self._existing(collection)
            if ids is not None:
                rows = [col.rows[i] for i in dict.fromkeys(ids) if i in col.rows]
                if filters:
                    rows = [r for r in rows if matches(col.metadata[r], filters)]
            else:
                rows = col.selected(filters or {})
            return [col.document(r) for r in rows[:limit]]

    def delete(self, collection: str, ids: str | Iterable[str] | None = None,
               filters: Mapping[str, Any] | None = None) -> int:
        """Delete the documents of ``ids`` (one id, or a list), or those that match
        ``filters``; how many."""
        if filters is not None:
            check(filters)
        ids = ids_of(ids)
        with self._lock:
            col = self._existing(collection)
            chosen = list(ids) if ids is not None else [col.ids[r] for r in col.selected(filters or {})]
            if ids is not None and filters:
                chosen = [i for i in chosen if i in col.rows and matches(col.metadata[col.rows[i]], filters)]
            removed = col.remove(chosen)
            if removed:
                self._log(collection, {"op": "remove", "ids": chosen})
            return removed

    # --- files -------------------------------------------------------------------------
    def _existing(self, name: str) -> _Collection:
        """Collection ``name`` (under the lock); CollectionNotFoundError if it is not made."""
        col = self._collections.get(name)
        if col is None:
            raise CollectionNotFoundError(name, self._collections)
        return col

    def _get(self, name: str) -> _Collection:
        """Collection ``name``, made if it is new."""
        col = self._collections.get(name)
        if col is None:
            if not name or "/" in name or name.startswith("."):
                raise ValueError(f"a collection's name is not empty and holds no '/': {name!r}")
            col = self._collections[name] = _Collection(self._np)
        return col

    def _write(self, collection: str, documents: Sequence[Mapping[str, Any]], vectors: Any) -> list[str]:
        ids = [str(d["id"]) for d in documents]
        contents = [str(d["content"]) for d in documents]
        metas = [dict(d.get("metadata") or {}) for d in documents]
        metadata_json(metas)
        self._get(collection).upsert(ids, contents, metas, vectors)
        self._log(collection, {"op": "upsert", "ids": ids, "contents": contents, "metadata": metas,
                               "vectors": self._encode(vectors)})
        return ids

    def _encode(self, vectors: Any) -> list[str]:
        arr = self._np.asarray(vectors, dtype=self._np.float32)
        return [base64.b64encode(row.tobytes()).decode() for row in arr]

    def _log(self, collection: str, entry: dict[str, Any]) -> None:
        if self.path is None:
            return
        with open(self.path / f"{collection}.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, separators=(",", ":")) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def _read_log(self, collection: str, log: Path) -> None:
        np = self._np
        col = self._get(collection)
        with open(log, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    entry = json.loads(line)
                except ValueError:
                    if not line.endswith("\n"):  # the last write, cut short by a crash
                        break
                    raise ValueError(f"{log}:{n}: not a record of this store") from None
                if entry["op"] == "upsert":
                    vectors = np.stack([np.frombuffer(base64.b64decode(v), dtype=np.float32)
                                        for v in entry["vectors"]])
                    col.upsert(entry["ids"], entry["contents"], entry["metadata"], vectors)
                else:
                    col.remove(entry["ids"])


__all__ = ["EmbeddedVectorStore"]
