"""Reading typed values out of a YAML definition's entries, each error naming the file,
line and column of what is wrong (``located.py`` keeps the places). Example::

    name = text(entry, "name", required=True)     # "support"
    tools = seq(entry, "tools")                     # an empty list when absent
    fn = imported(entry, "function")                # "pkg.module:attr", imported
"""

from __future__ import annotations

from typing import Any

from eddies.connectors.declarative.located import DefinitionError, Map, Seq, where
from eddies.connectors.declarative.references import import_target, read_env
from eddies.engine.options import did_you_mean


def keys(entry: Map, allowed: set[str], what: str) -> None:
    """Refuse a key of ``entry`` (``what``) not in ``allowed``."""
    for key in entry:
        if key not in allowed:
            at = entry.key_at.get(key, entry.where)
            raise DefinitionError(f"{at}: {key!r} is not a key of {what}"
                                  f"{did_you_mean(str(key), allowed)} (its keys: "
                                  f"{', '.join(sorted(allowed))})")


def entry_at(parent: Seq, i: int, item: Any, allowed: set[str] | None, what: str,
             named: bool = True) -> Map:
    """``item`` (item ``i`` of ``parent``), a mapping (``what``) of ``allowed`` keys (None:
    any), with a name unless not ``named``."""
    if not isinstance(item, Map):
        raise DefinitionError(f"{where(parent, i)}: {what} is a mapping")
    if allowed is not None:
        keys(item, allowed, what)
    if named and "name" not in item:
        raise DefinitionError(f"{item.where}: {what} needs a name")
    return item


def python_only(entry: Map) -> None:
    """Refuse a ``type`` other than python (or mcp, a2a, read elsewhere)."""
    kind = entry.get("type", "python")
    if kind not in ("python", "mcp", "a2a"):
        raise DefinitionError(f"{where(entry, 'type')}: type {kind!r}: only python is supported here")


def text(entry: Map, key: str, required: bool = False) -> Any:
    """Text ``key`` (``${NAME}`` read from the environment), or None when absent."""
    value = entry.get(key)
    if value is None:
        if required:
            raise DefinitionError(f"{entry.where}: {key!r} is required")
        return None
    if not isinstance(value, str):
        raise DefinitionError(f"{where(entry, key)}: {key}: expected text, got {value!r}")
    return read_env(value, where(entry, key))


def integer(entry: Map, key: str, default: int | None = None) -> int | None:
    """Whole number ``key``, or ``default`` when absent."""
    value = entry.get(key, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise DefinitionError(f"{where(entry, key)}: {key}: expected a whole number, got {value!r}")
    return value


def boolean(entry: Map, key: str, default: bool = False) -> bool:
    """``true`` or ``false`` ``key``, or ``default`` when absent."""
    value = entry.get(key, default)
    if not isinstance(value, bool):
        raise DefinitionError(f"{where(entry, key)}: {key}: expected true or false, got {value!r}")
    return value


def seq(entry: Map, key: str, required: bool = False) -> Seq:
    """List ``key`` (empty when absent)."""
    value = entry.get(key)
    if value is None:
        if required:
            raise DefinitionError(f"{entry.where}: {key!r} is required")
        empty = Seq()
        empty.where, empty.item_where = entry.where, []
        return empty
    if not isinstance(value, Seq):
        raise DefinitionError(f"{where(entry, key)}: {key}: expected a list, got {value!r}")
    return value


def mapping(entry: Map, key: str) -> Map:
    """Mapping ``key`` (empty when absent)."""
    value = entry.get(key)
    if value is None:
        empty = Map()
        empty.where, empty.key_where, empty.key_at = entry.where, {}, {}
        return empty
    if not isinstance(value, Map):
        raise DefinitionError(f"{where(entry, key)}: {key}: expected a mapping, got {value!r}")
    return value


def imported(entry: Map, key: str, required: bool = False) -> Any:
    """What ``key`` names (``module:attr``), imported; None when absent."""
    name = text(entry, key, required)
    return None if name is None else import_text(entry, key, name)


def import_text(entry: Map, key: str, name: str) -> Any:
    """What ``name`` (the text of ``key``) names, imported."""
    return import_target(name, where(entry, key), key)


def blob_folder(path: str | None) -> Any:
    """The blob store a ``blob_store`` entry names (a folder), or None."""
    if not path:
        return None
    from eddies.connectors.stores.blobs import FolderBlobStore

    return FolderBlobStore(path)


def made_from_clazz(parent: Seq, i: int, item: Any, aliases: dict[str, str], what: str
                    ) -> tuple[str, Any]:
    """(name, object) of an entry (``what``: a model connection, a vector store) that names
    its ``clazz`` (an alias in ``aliases`` or ``module:Class``), made with the entry's other
    keys (``${NAME}`` read from the environment)."""
    entry = entry_at(parent, i, item, None, what)
    python_only(entry)
    clazz = text(entry, "clazz", required=True)
    target = import_text(entry, "clazz", aliases.get(clazz, clazz))
    extras = {k: read_env(v, where(entry, k)) for k, v in entry.items()
              if k not in ("name", "clazz", "type")}
    if "responder" in extras and isinstance(extras["responder"], str):
        extras["responder"] = import_text(entry, "responder", extras["responder"])
    if "blob_store" in extras:
        extras["blob_store"] = blob_folder(text(entry, "blob_store"))
    try:
        return text(entry, "name", required=True), target(**extras)
    except (TypeError, ValueError) as err:  # a key it does not take, a value it refuses
        raise DefinitionError(f"{entry.where}: {clazz}: {err}") from None


__all__ = ["blob_folder", "entry_at", "import_text", "imported", "integer", "keys", "made_from_clazz",
           "mapping", "python_only", "seq", "text"]
