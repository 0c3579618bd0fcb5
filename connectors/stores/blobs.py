"""Blobs too big to travel in an event: an image, audio or a file a tool gave, kept by the
hash of its bytes and carried by reference (``eddies-blob:sha256:HEX``) in the content
block that stands for it.

``FolderBlobStore`` keeps each blob in a file named by its hash, written once (a second
put of the same bytes writes nothing): a folder every worker of a fleet mounts (NFS, a
shared volume) serves them all. A blob store is given to what writes blocks (an
``McpServer``'s ``blob_store``) and to what reads them (``LiteLLMChatModel(blob_store=)``);
a reference nothing can read is sent as its description (the protocol, ``BlobStore``, is
:mod:`eddies.engine.content`'s). Example::

    blobs = FolderBlobStore("/mnt/shared/eddies-blobs")
    uri = blobs.put(pdf_bytes)           # "eddies-blob:sha256:9f86d0..."
    blobs.get(uri) == pdf_bytes
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from eddies.engine.content import BLOB_SCHEME as SCHEME
from eddies.engine.content import is_blob


class FolderBlobStore:
    """Blobs as files of a folder, named by their SHA-256."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def put(self, data: bytes) -> str:
        """Keep ``data`` (once: the same bytes have the same name); its reference."""
        digest = hashlib.sha256(data).hexdigest()
        target = self.path / digest
        if not target.exists():
            # Written beside, then renamed: a reader never sees half a blob, and two writers
            # of the same bytes leave one whole file.
            fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".part-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        return SCHEME + digest

    def get(self, uri: str) -> bytes:
        """The bytes of ``uri``; a KeyError if this store does not hold them, a ValueError
        if the file is not what its name says (corrupted)."""
        if not is_blob(uri):
            raise ValueError(f"not a blob reference: {uri!r}")
        digest = uri[len(SCHEME):]
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise ValueError(f"not a blob reference: {uri!r}")
        try:
            data = (self.path / digest).read_bytes()
        except FileNotFoundError:
            raise KeyError(f"blob {uri} is not in {self.path}") from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise ValueError(f"blob {uri} in {self.path} does not hash to its name")
        return data


__all__ = ["FolderBlobStore"]
