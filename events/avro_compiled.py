"""Avro binary encoding compiled from a schema into straight-line Python.

fastavro interprets the schema for every record (~0.3 us per field here); this module
generates, once per schema, one writer and one reader function per named type, which
is 2-3x faster for the envelope. It covers what Eddies' schemas use: primitives,
records, enums, arrays, maps, ``["null", T]`` unions and unions of records (written in
fastavro's tuple notation ``(name, record)``). Bytes are identical to fastavro's, and
fastavro stays the reference (tests compare the two) and the reader for data written
with an older schema version (schema resolution).

:func:`compile_schema` reads and writes Avro-shaped dicts; :func:`compile_object_writer`
writes the same bytes straight from Python objects (attributes, converters and union
branches by class, as an :class:`ObjectBinding` says), which saves building the dict.

Readers return ``timestamp-millis`` as int milliseconds and accept negative block counts
(blocked arrays and maps written by other Avro implementations).
"""

from __future__ import annotations

import keyword
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Record = dict[str, Any]

_ONE = [bytes([i]) for i in range(128)]
_pack_d = struct.Struct("<d").pack
_pack_f = struct.Struct("<f").pack
_unpack_d = struct.Struct("<d").unpack_from
_unpack_f = struct.Struct("<f").unpack_from


#: Encoded (length-prefixed) strings of the fields an ObjectBinding marks as repeating.
_STR_CACHE: dict[str, bytes] = {}


def _str_entry(v: str) -> bytes:
    data = _str(v)
    if len(_STR_CACHE) >= 8192:
        _STR_CACHE.clear()
    _STR_CACHE[v] = data
    return data


#: Varints of large numbers seen recently: an event's millisecond timestamp takes six
#: loop turns to encode and repeats across the events of a session and of a batch.
_LONG_CACHE: dict[int, bytes] = {}


def _long(v: int) -> bytes:
    n = (v << 1) ^ (v >> 63)
    if n < 0x80:
        return _ONE[n]
    if n < 0x4000:  # two bytes (a length of 64 to 8191: JSON values, conversations)
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    cached = _LONG_CACHE.get(v)
    if cached is not None:
        return cached
    if not -(1 << 63) <= v < (1 << 63):  # an Avro long is 64 bits; no reader takes more
        raise ValueError(f"{v} is outside the 64-bit range of an Avro long")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    data = bytes(out)
    if len(data) >= 3:
        if len(_LONG_CACHE) >= 4096:
            _LONG_CACHE.clear()
        _LONG_CACHE[v] = data
    return data


def _str(v: str) -> bytes:
    b = v.encode()
    n = len(b)
    return (_ONE[n << 1] if n < 64 else _long(n)) + b


def _bytes(v: bytes) -> bytes:
    n = len(v)
    return (_ONE[n << 1] if n < 64 else _long(n)) + bytes(v)


def _millis(v: Any) -> int:
    if isinstance(v, int):
        return v
    import datetime

    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return int((v - epoch) // datetime.timedelta(milliseconds=1))


def _rl(b: bytes, i: int) -> tuple[int, int]:
    x = b[i]
    i += 1
    if x < 0x80:
        return (x >> 1) ^ -(x & 1), i
    n = x & 0x7F
    shift = 7
    while True:
        x = b[i]
        i += 1
        n |= (x & 0x7F) << shift
        if x < 0x80:
            if n >> 64:
                raise ValueError("varint beyond the 64 bits of an Avro long")
            return (n >> 1) ^ -(n & 1), i
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than the 10 bytes of an Avro long")


def _rs(b: bytes, i: int) -> tuple[str, int]:
    n, i = _rl(b, i)
    end = i + n
    if n < 0 or end > len(b):
        raise ValueError(f"string length {n} out of range")
    return b[i:end].decode(), end


def _rb(b: bytes, i: int) -> tuple[bytes, int]:
    n, i = _rl(b, i)
    end = i + n
    if n < 0 or end > len(b):
        raise ValueError(f"bytes length {n} out of range")
    return bytes(b[i:end]), end


def _rcount(b: bytes, i: int) -> tuple[int, int]:
    n, i = _rl(b, i)
    if n < 0:  # a block with its size in bytes: skip the size
        n = -n
        _, i = _rl(b, i)
    if n > len(b) - i:
        raise ValueError(f"block count {n} larger than the remaining data")
    return n, i


@dataclass(frozen=True)
class ObjectBinding:
    """How a schema's records map to Python objects, for :func:`compile_object_writer`.

    A record's field ``f`` is read as attribute ``f`` of its object, or, when ``convert``
    has ``"Record.f"``, as ``convert["Record.f"](obj)`` (e.g. a Python value written as
    JSON text). A union of records picks its branch by the object's exact type
    (``classes``: record full name -> class); any other object goes through ``fallback``,
    which returns the branch's record name and the object to write in its place.
    """

    classes: dict[str, type]
    convert: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    fallback: Callable[[Any], tuple[str, Any]] | None = None
    #: ``"Record.field"`` string fields whose values repeat (names, session ids): their
    #: encoded form is looked up in a bounded cache instead of encoded each time.
    cached: frozenset[str] = frozenset()


class _Compiler:
    def __init__(self, binding: ObjectBinding | None = None) -> None:
        self.binding = binding
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {
            "_long": _long, "_LONG_CACHE": _LONG_CACHE, "_str": _str, "_bytes": _bytes,
            "_STR_CACHE": _STR_CACHE, "_str_entry": _str_entry,
            "_millis": _millis, "_ONE": _ONE,
            "_pack_d": _pack_d, "_pack_f": _pack_f, "_unpack_d": _unpack_d,
            "_unpack_f": _unpack_f, "_rl": _rl, "_rs": _rs, "_rb": _rb, "_rcount": _rcount,
        }
        self.named: dict[str, Any] = {}
        self.done: set[str] = set()
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    @staticmethod
    def fn(kind: str, name: str) -> str:
        return f"{kind}_" + "".join(c if c.isalnum() else "_" for c in name)

    def register(self, schema: Any) -> None:
        if isinstance(schema, list):
            for s in schema:
                self.register(s)
        elif isinstance(schema, dict):
            t = schema["type"]
            if t in ("record", "error", "enum", "fixed"):
                if schema["name"] in self.named:
                    return
                self.named[schema["name"]] = schema
                for f in schema.get("fields", ()):
                    self.register(f["type"])
            elif t == "array":
                self.register(schema["items"])
            elif t == "map":
                self.register(schema["values"])

    def resolve(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema in self.named:
            return self.named[schema]
        if isinstance(schema, dict) and schema.get("type") in self.named:
            return self.named[schema["type"]]
        return schema

    # --- writers: code that computes the bytes of `v` ------------------------------------
    # ``write`` returns (statements, pieces): statements to run first, then expressions
    # whose bytes, in order, are ``v``'s encoding. A record's writer returns
    # ``b"".join((piece, ...))`` of its fields' pieces: one join per record and no call per
    # field (an ``append`` per field cost a third of the time).
    def write(self, schema: Any, v: str, ind: str, cached: bool = False) -> tuple[list[str], list[str]]:
        s = self.resolve(schema)
        t = s if isinstance(s, str) else (s if isinstance(s, list) else s["type"])
        if isinstance(t, list):
            return self.write_union(t, v, ind, cached)
        if t == "string" and cached:
            c = self.fresh("_c")
            return [f"{ind}{c} = _STR_CACHE.get({v})", f"{ind}if {c} is None: {c} = _str_entry({v})"], [c]
        if isinstance(s, dict) and s.get("logicalType") == "timestamp-millis" and t == "long":
            # Timestamps repeat across a batch's events: their varint, cached, without a call.
            c = self.fresh("_c")
            return [f"{ind}{c} = _LONG_CACHE.get({v}) if type({v}) is int else None",
                    f"{ind}if {c} is None: {c} = _long(_millis({v}))"], [c]
        if t in ("int", "long"):  # small non-negative numbers (most of them) inline
            return [], [f"(_ONE[{v} + {v}] if 0 <= {v} < 64 else _long({v}))"]
        if t == "string":  # inline: no call, no concatenation
            b, n = self.fresh("_b"), self.fresh("_n")
            return ([f"{ind}{b} = {v}.encode()", f"{ind}{n} = len({b})"],
                    [f"(_ONE[{n} + {n}] if {n} < 64 else _long({n}))", b])
        simple = {
            "null": None, "boolean": f"(b'\\x01' if {v} else b'\\x00')",
            "bytes": f"_bytes({v})", "double": f"_pack_d({v})", "float": f"_pack_f({v})",
        }
        if t in simple:
            piece = simple[t]
            return [], [] if piece is None else [piece]
        if t in ("record", "error"):
            self.ensure(s)
            return [], [f"{self.fn('w', s['name'])}({v})"]
        if t == "enum":
            table = self.fresh("_enum")
            self.consts[table] = {sym: _long(k) for k, sym in enumerate(s["symbols"])}
            return [], [f"{table}[{v}]"]
        if t == "fixed":
            return [], [f"bytes({v})"]
        if t in ("array", "map"):
            item, seq, acc = self.fresh("x"), self.fresh("s"), self.fresh("p")
            out = [f"{ind}{seq} = {v}", f"{ind}if {seq}:", f"{ind}    {acc} = [_long(len({seq}))]"]
            inner = ind + "        "
            if t == "array":
                out.append(f"{ind}    for {item} in {seq}:")
                lines, pieces = self.write(s["items"], item, inner)
            else:
                key = self.fresh("k")
                out.append(f"{ind}    for {key}, {item} in {seq}.items():")
                lines, pieces = self.write(s["values"], item, inner)
                pieces = [f"_str({key})", *pieces]
            out += lines
            out.append(f"{inner}{acc} += ({', '.join(pieces)},)" if pieces else f"{inner}pass")
            out += [f"{ind}    {acc}.append(b'\\x00')", f"{ind}    {acc} = b''.join({acc})",
                    f"{ind}else:", f"{ind}    {acc} = b'\\x00'"]
            return out, [acc]
        raise NotImplementedError(f"Avro type {t!r} is not supported by the compiled codec")

    def write_union(self, branches: list[Any], v: str, ind: str, cached: bool = False
                    ) -> tuple[list[str], list[str]]:
        if len(branches) == 2 and branches[0] == "null":
            acc = self.fresh("p")
            lines, pieces = self.write(branches[1], v, ind + "    ", cached)
            return [f"{ind}if {v} is None:", f"{ind}    {acc} = b'\\x00'", f"{ind}else:", *lines,
                    f"{ind}    {acc} = b''.join((b'\\x02', {', '.join(pieces)}))"], [acc]
        resolved = [self.resolve(b) for b in branches]
        if not all(isinstance(r, dict) and r["type"] == "record" for r in resolved):
            raise NotImplementedError(f"union {branches!r} is not supported by the compiled codec")
        table = self.fresh("_branch")
        self.consts[table] = {
            r["name"]: (_long(k), self.fn("w", r["name"])) for k, r in enumerate(resolved)
        }
        for r in resolved:
            self.ensure(r)
        name, body, t = self.fresh("n"), self.fresh("b"), self.fresh("_t")
        if self.binding is not None:  # the branch of an object is its type's record
            classes = self.binding.classes
            by_type = self.fresh("_bytype")
            self.consts[by_type] = {classes[r["name"]]: self.consts[table][r["name"]]
                                    for r in resolved if r["name"] in classes}
            fallback = self.fresh("_fallback")
            self.consts[fallback] = self.binding.fallback or _no_branch
            return [
                f"{ind}{t} = {by_type}.get(type({v}))",
                f"{ind}if {t} is None:",
                f"{ind}    {name}, {body} = {fallback}({v})",
                f"{ind}    {t} = {table}[{name}]",
                f"{ind}else:",
                f"{ind}    {body} = {v}",
            ], [f"{t}[0]", f"_W[{t}[1]]({body})"]
        return [f"{ind}{name}, {body} = {v}", f"{ind}{t} = {table}[{name}]"], [
            f"{t}[0]", f"_W[{t}[1]]({body})"]

    # --- readers: emit code setting `target` from `b` at position `i` ------------------
    def read(self, schema: Any, target: str, ind: str) -> list[str]:
        s = self.resolve(schema)
        t = s if isinstance(s, str) else (s if isinstance(s, list) else s["type"])
        if isinstance(t, list):
            return self.read_union(t, target, ind)
        if t in ("int", "long"):  # one-byte varints inline, longer ones in _rl
            return [f"{ind}_x = b[i]", f"{ind}if _x < 0x80:",
                    f"{ind}    {target} = (_x >> 1) ^ -(_x & 1); i += 1",
                    f"{ind}else:", f"{ind}    {target}, i = _rl(b, i)"]
        if t == "string":  # short strings (length < 64) inline, others in _rs
            return [f"{ind}_x = b[i]", f"{ind}if _x < 0x80 and not _x & 1:",
                    f"{ind}    _e = i + 1 + (_x >> 1)",
                    f"{ind}    if _e > len(b): raise ValueError('string out of range')",
                    f"{ind}    {target} = b[i + 1:_e].decode(); i = _e",
                    f"{ind}else:", f"{ind}    {target}, i = _rs(b, i)"]
        simple = {
            "null": f"{ind}{target} = None",
            "boolean": f"{ind}{target} = b[i] == 1; i += 1",
            "bytes": f"{ind}{target}, i = _rb(b, i)",
            "double": f"{ind}{target} = _unpack_d(b, i)[0]; i += 8",
            "float": f"{ind}{target} = _unpack_f(b, i)[0]; i += 4",
        }
        if t in simple:
            return [simple[t]]
        if t in ("record", "error"):
            self.ensure(s)
            return [f"{ind}{target}, i = {self.fn('r', s['name'])}(b, i)"]
        if t == "enum":
            table = self.fresh("_syms")
            self.consts[table] = tuple(s["symbols"])
            idx = self.fresh("e")
            return [f"{ind}{idx}, i = _rl(b, i)", f"{ind}{target} = {table}[{idx}]"]
        if t == "fixed":
            return [f"{ind}{target} = bytes(b[i:i + {s['size']}]); i += {s['size']}"]
        if t in ("array", "map"):
            acc, n, item = self.fresh("acc"), self.fresh("n"), self.fresh("x")
            out = [f"{ind}{acc} = [] if {t == 'array'} else {{}}",
                   f"{ind}{n}, i = _rcount(b, i)", f"{ind}while {n}:",
                   f"{ind}    for _ in range({n}):"]
            if t == "array":
                out += self.read(s["items"], item, ind + "        ")
                out.append(f"{ind}        {acc}.append({item})")
            else:
                key = self.fresh("k")
                out.append(f"{ind}        {key}, i = _rs(b, i)")
                out += self.read(s["values"], item, ind + "        ")
                out.append(f"{ind}        {acc}[{key}] = {item}")
            out += [f"{ind}    {n}, i = _rcount(b, i)", f"{ind}{target} = {acc}"]
            return out
        raise NotImplementedError(f"Avro type {t!r} is not supported by the compiled codec")

    def read_union(self, branches: list[Any], target: str, ind: str) -> list[str]:
        idx = self.fresh("u")
        out = [f"{ind}{idx}, i = _rl(b, i)"]
        if len(branches) == 2 and branches[0] == "null":
            out += [f"{ind}if {idx} == 0:", f"{ind}    {target} = None",
                    f"{ind}elif {idx} == 1:", *self.read(branches[1], target, ind + "    "),
                    f"{ind}else:", f"{ind}    raise ValueError('union index out of range')"]
            return out
        resolved = [self.resolve(b) for b in branches]
        if not all(isinstance(r, dict) and r["type"] == "record" for r in resolved):
            raise NotImplementedError(f"union {branches!r} is not supported by the compiled codec")
        table = self.fresh("_readers")
        for r in resolved:
            self.ensure(r)
        self.consts[table] = tuple((r["name"], self.fn("r", r["name"])) for r in resolved)
        body = self.fresh("v")
        return [
            *out,
            f"{ind}if not 0 <= {idx} < {len(resolved)}:",
            f"{ind}    raise ValueError('union index out of range')",
            f"{ind}_name, _r = {table}[{idx}]",
            f"{ind}{body}, i = _R[_r](b, i)",
            f"{ind}{target} = (_name, {body})",
        ]

    def ensure(self, record: Any) -> None:
        name = record["name"]
        if name in self.done:
            return
        self.done.add(name)
        w = [f"def {self.fn('w', name)}(r):"]
        pieces: list[str] = []
        r = [f"def {self.fn('r', name)}(b, i):"]
        keys = []
        convert = self.binding.convert if self.binding is not None else {}
        for k, f in enumerate(record["fields"]):
            var = f"f{k}"
            conv = convert.get(f"{name}.{f['name']}")
            if conv is not None:
                const = self.fresh("_conv")
                self.consts[const] = conv
                w.append(f"    {var} = {const}(r)")
            elif self.binding is None:
                w.append(f"    {var} = r[{f['name']!r}]")
            elif keyword.iskeyword(f["name"]):
                w.append(f"    {var} = getattr(r, {f['name']!r})")
            else:
                w.append(f"    {var} = r.{f['name']}")
            cached = self.binding is not None and f"{name}.{f['name']}" in self.binding.cached
            lines, more = self.write(f["type"], var, "    ", cached)
            w += lines
            pieces += more
            r += self.read(f["type"], var, "    ")
            keys.append(f"{f['name']!r}: {var}")
        w.append(f"    return b''.join(({', '.join(pieces)},))" if pieces else "    return b''")
        r.append(f"    return {{{', '.join(keys)}}}, i")
        self.lines += [*w, "", *r, ""]


def _no_branch(obj: Any) -> tuple[str, Any]:
    raise TypeError(f"{type(obj).__name__} is not a branch of the union")


def compile_object_writers(parsed: Any, binding: ObjectBinding) -> dict[str, Callable[[Any], bytes]]:
    """``encode(obj) -> bytes`` for objects of every record of a parsed schema (by full
    name), read as ``binding`` says: the bytes :func:`compile_schema`'s encoder writes for
    the equivalent record, without building that record first.

    Example::

        writers = compile_object_writers(schema, ObjectBinding(classes={"ns.Point": Point}))
        writers["ns.Point"](Point(x=1, y=2))
    """
    c = _Compiler(binding)
    c.register(parsed)
    c.ensure(c.resolve(parsed))
    namespace: dict[str, Any] = dict(c.consts)
    exec("\n".join(c.lines), namespace)  # generated from the schema only, never from data
    namespace["_W"] = {k: v for k, v in namespace.items() if k.startswith("w_")}

    return {name: namespace[c.fn("w", name)] for name in sorted(c.done)}


_PRIMITIVES: dict[str, tuple[type, ...]] = {
    "string": (str,), "bytes": (bytes, bytearray), "boolean": (bool,), "int": (int,),
    "long": (int,), "float": (int, float), "double": (int, float), "null": (type(None),),
}


def find_type_error(parsed: Any, record: str, obj: Any, binding: ObjectBinding) -> str | None:
    """Where ``obj`` (an object of ``record``, read as ``binding`` says) does not fit the
    schema: ``"Record.field: expected string, got int"``, or None if nothing is found.

    The object writers only report the Python error; this names the field (for error
    messages, after a write failed).
    """
    c = _Compiler(binding)
    c.register(parsed)
    return _type_error(c, c.named[record], obj, record.rsplit(".", 1)[-1])


def _type_error(c: _Compiler, schema: Any, v: Any, path: str) -> str | None:
    s = c.resolve(schema)
    if isinstance(s, list):  # a union: some branch must fit
        errors = [_type_error(c, b, v, path) for b in s]
        if None in errors:
            return None
        classes = c.binding.classes if c.binding is not None else {}
        for branch, error in zip(s, errors, strict=True):  # v's class's record: its own error
            r = c.resolve(branch)
            if isinstance(r, dict) and classes.get(r.get("name", "")) is type(v):
                return error
        names = [b if isinstance(b, str) else c.resolve(b).get("name", c.resolve(b)["type"]) for b in s]
        return f"{path}: expected one of {', '.join(names)}, got {type(v).__name__}"
    t = s if isinstance(s, str) else s["type"]
    if t in _PRIMITIVES:
        ok = isinstance(v, _PRIMITIVES[t]) and not (t in ("int", "long") and isinstance(v, bool))
        return None if ok else f"{path}: expected {t}, got {type(v).__name__}"
    if t == "enum":
        return None if v in s["symbols"] else f"{path}: {v!r} is not one of {', '.join(s['symbols'])}"
    if t == "array":
        if not isinstance(v, (list, tuple)):
            return f"{path}: expected a list, got {type(v).__name__}"
        for k, item in enumerate(v):
            found = _type_error(c, s["items"], item, f"{path}[{k}]")
            if found:
                return found
        return None
    if t in ("record", "error"):
        binding = c.binding
        assert binding is not None
        cls = binding.classes.get(s["name"])
        if cls is not None and type(v) is not cls:
            return f"{path}: expected {cls.__name__}, got {type(v).__name__}"
        for f in s["fields"]:
            key = f"{s['name']}.{f['name']}"
            if key in binding.convert:
                continue  # converted values (JSON text) report their own errors
            if not hasattr(v, f["name"]):
                return f"{path}.{f['name']}: missing"
            found = _type_error(c, f["type"], getattr(v, f["name"]), f"{path}.{f['name']}")
            if found:
                return found
        return None
    return None  # maps, fixed and logical types: not needed by Eddies' payloads


def compile_object_writer(parsed: Any, binding: ObjectBinding) -> Callable[[Any], bytes]:
    """The writer of :func:`compile_object_writers` for the top-level record."""
    return compile_object_writers(parsed, binding)[parsed["name"]]


def compile_schema(parsed: Any) -> tuple[Callable[[Record], bytes], Callable[[bytes], Record]]:
    """(encode, decode) for records of a parsed top-level record schema.

    ``decode`` raises ValueError/IndexError/KeyError/UnicodeDecodeError on bad input; the
    caller maps those to its own error type. NotImplementedError if the schema uses a
    construct this compiler does not cover (use fastavro then).
    """
    c = _Compiler()
    c.register(parsed)
    c.ensure(c.resolve(parsed))
    top = parsed["name"]
    namespace: dict[str, Any] = dict(c.consts)
    exec("\n".join(c.lines), namespace)  # generated from the schema only, never from data
    namespace["_W"] = {k: v for k, v in namespace.items() if k.startswith("w_")}
    namespace["_R"] = {k: v for k, v in namespace.items() if k.startswith("r_")}
    writer = namespace[c.fn("w", top)]
    reader = namespace[c.fn("r", top)]

    def encode(record: Record) -> bytes:
        data: bytes = writer(record)
        return data

    def decode(data: bytes) -> Record:
        rec, end = reader(data, 0)
        if end != len(data):
            raise ValueError(f"{len(data) - end} trailing bytes")
        result: Record = rec
        return result

    return encode, decode
