"""Content beside text: the images, audio, files and resources a tool gives or a message
holds (``ContentBlock``), carried inline up to a size limit.

A tool that gives blocks returns its value wrapped by :func:`with_blocks` (the durable
call's outcome is JSON, the bytes base64 in it); the tool result the model's
conversation gets has the value and the blocks apart (:func:`split_blocks`), and the
model's connection passes the blocks to a model that takes them. Bytes over
``MAX_INLINE_BYTES`` go to a blob store when the writer has one (the block carries the
reference); else they are not carried: the block keeps its kind, size and uri, and says so.
Example::

    block = inline_block(ContentKind.IMAGE, png, mime_type="image/png")
    value = with_blocks("Our brochure:", [block])      # what the tool call returns
    result, blocks = split_blocks(value)               # "Our brochure:", [block]
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Protocol

from eddies.events import BLOB_SCHEME, ContentBlock, ContentKind

#: The key of a tool's value that holds its blocks (beside ``result``).
BLOCKS_KEY = "eddies.blocks"
#: Bytes carried in one block, at most: every model call of the conversation repeats them
#: in its journaled arguments, and a record must fit the broker's limit (1 MiB by default).
MAX_INLINE_BYTES = 256 * 1024


class BlobStore(Protocol):
    """Where bytes too big for a block are kept (``eddies.connectors.stores.blobs``):
    ``put`` gives a reference (``BLOB_SCHEME`` and the bytes' hash), ``get`` the bytes."""

    def put(self, data: bytes) -> str: ...

    def get(self, uri: str) -> bytes: ...


def is_blob(uri: str | None) -> bool:
    """Whether ``uri`` refers to a blob of a blob store."""
    return bool(uri) and str(uri).startswith(BLOB_SCHEME)


def inline_block(kind: ContentKind, data: bytes, *, mime_type: str | None = None,
                 uri: str | None = None, name: str | None = None,
                 limit: int = MAX_INLINE_BYTES, blobs: BlobStore | None = None) -> ContentBlock:
    """A block of ``data``; over ``limit``, one that carries a reference to it in ``blobs``
    (its own uri, if it had one, kept as its text), or, without a blob store, one that
    says what it was without it."""
    if len(data) <= limit:
        return ContentBlock(kind, "", mime_type, data, uri, name, len(data))
    if blobs is None:
        return ContentBlock(kind, "", mime_type, None, uri, name, len(data))
    return ContentBlock(kind, uri or "", mime_type, None, blobs.put(data), name, len(data))


def block_value(block: ContentBlock) -> dict[str, Any]:
    """``block`` as JSON (its bytes base64)."""
    return {"kind": block.kind.value, "text": block.text, "mime_type": block.mime_type,
            "data": None if block.data is None else base64.b64encode(block.data).decode(),
            "uri": block.uri, "name": block.name, "size": block.size}


def block_of(value: Mapping[str, Any] | ContentBlock) -> ContentBlock:
    """A block from its JSON (:func:`block_value`)."""
    if isinstance(value, ContentBlock):
        return value
    data = value.get("data")
    return ContentBlock(ContentKind(value.get("kind", "text")), str(value.get("text") or ""),
                        value.get("mime_type"), None if data is None else base64.b64decode(data),
                        value.get("uri"), value.get("name"), value.get("size"))


def with_blocks(result: Any, blocks: list[ContentBlock]) -> Any:
    """A tool's value: ``result`` with ``blocks`` beside it (``result`` alone without)."""
    if not blocks:
        return result
    return {"result": result, BLOCKS_KEY: [block_value(b) for b in blocks]}


def split_blocks(value: Any) -> tuple[Any, list[ContentBlock]]:
    """A tool's value apart: its result, and its blocks."""
    # type(...) is dict: on every tool result, and an ABC's isinstance costs ten times more.
    if type(value) is dict and BLOCKS_KEY in value and len(value) == 2 and "result" in value:
        return value["result"], [block_of(b) for b in value[BLOCKS_KEY]]
    return value, []


__all__ = [
    "BLOB_SCHEME",
    "BLOCKS_KEY",
    "MAX_INLINE_BYTES",
    "BlobStore",
    "block_of",
    "block_value",
    "inline_block",
    "is_blob",
    "split_blocks",
    "with_blocks",
]
