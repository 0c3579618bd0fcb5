"""What an MCP tool's result holds, as a session keeps it: each content block as a block a
model can take (:func:`content_block`: images, audio and files inline or by reference to a
blob store) and as text (:func:`content_text`: for models that take text only, what is not
text as a line that says what it was). Example::

    content_text(image_block)           # '[image image/png, 95 bytes]'
    content_block(image_block, blobs)   # a ContentBlock of kind IMAGE
"""

from __future__ import annotations

import base64
from typing import Any

from eddies.engine.content import MAX_INLINE_BYTES, BlobStore, inline_block
from eddies.events import ContentBlock, ContentKind


def content_block(block: Any, blobs: BlobStore | None = None) -> ContentBlock | None:
    """What of one content block of a tool's result goes to the model beside its text: an
    image, audio or binary resource (its bytes within the size limit, else a reference to
    them in ``blobs``), a link; None for a text (the result's text holds it)."""
    kind = getattr(block, "type", None)
    if kind in ("image", "audio"):
        return inline_block(ContentKind.IMAGE if kind == "image" else ContentKind.AUDIO,
                            base64.b64decode(block.data), mime_type=block.mime_type, blobs=blobs)
    if kind == "resource" and getattr(block.resource, "blob", None) is not None:
        res = block.resource
        return inline_block(ContentKind.FILE, base64.b64decode(res.blob), mime_type=res.mime_type,
                            uri=str(res.uri), blobs=blobs)
    if kind == "resource_link":
        return ContentBlock(ContentKind.RESOURCE, "", getattr(block, "mime_type", None), None,
                            str(block.uri), block.name)
    return None


def content_text(block: Any, stored: bool = False) -> str:
    """One content block of a tool's result as the text a session keeps: a text as it is,
    an embedded text resource under its uri, and what is not text (an image, audio, a
    binary resource, a link) as a line that says what it was, so that nothing the server
    sent vanishes without a word, for models that take text only (the bytes themselves go
    as :func:`content_block`). Example: ``[image image/png, 95 bytes]``."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind} {block.mime_type}, {_sized(_decoded_size(block.data), stored)}]"
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        if text is not None:
            return f"[resource {res.uri}]\n{text}"
        return (f"[resource {res.uri} ({res.mime_type or 'binary'}), "
                f"{_sized(_decoded_size(getattr(res, 'blob', '')), stored)}]")
    if kind == "resource_link":
        return f"[resource link {block.name}: {block.uri}]"
    return f"[{kind} content: not passed on]"


def _sized(size: int, stored: bool) -> str:
    if size <= MAX_INLINE_BYTES or stored:  # carried, inline or by reference
        return f"{size} bytes"
    return f"{size} bytes: over the {MAX_INLINE_BYTES}-byte limit, not passed on"


def _decoded_size(base64_text: str) -> int:
    return len(base64_text) * 3 // 4 - base64_text[-2:].count("=")


__all__ = ["content_block", "content_text"]
