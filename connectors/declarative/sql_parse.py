"""Confluent-style SQL DDL read into statements that remember where each part was written,
so an error can name its line and column. Only ``CREATE`` statements of connections,
models, functions, tools and agents; what they mean is ``sql_agents``' concern. Example::

    [stmt] = parse_sql("CREATE TOOL t USING FUNCTION f WITH ('type' = 'function');", "a.sql")
    stmt.kind, stmt.name, stmt.using["FUNCTION"][0].text   # ("TOOL", "t", "f")
    stmt.options["type"].at                                # "a.sql:1:50"

Clauses may come in any order; which ones a kind of statement takes is checked by the
reader, which can then say "CREATE TOOL takes no USING MODEL" instead of a parse error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from eddies.connectors.declarative.located import DefinitionError

KINDS = ("CONNECTION", "MODEL", "FUNCTION", "PROMPT", "TOOL", "AGENT")
_TOKEN = re.compile(r"""
    (?P<space>\s+) | (?P<line_comment>--[^\n]*) | (?P<block_comment>/\*.*?\*/)
  | (?P<string>'(?:[^']|'')*') | (?P<quoted>`(?:[^`]|``)*`)
  | (?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?) | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<punct>[(),;=.])
""", re.VERBOSE | re.DOTALL)


@dataclass(frozen=True)
class Token:
    kind: str  # string | quoted | number | word | punct | end
    text: str  # a string's or a quoted name's value, unquoted
    at: str


@dataclass(frozen=True)
class Name:
    """An identifier (its last part: ``catalog.db.name`` is ``name``) and where it is."""

    text: str
    at: str


@dataclass(frozen=True)
class Option:
    """One ``'key' = value`` of a WITH clause; a value is text, a number or a boolean."""

    key: str
    value: str | int | float | bool
    key_at: str
    at: str  # the value's place


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    at: str


@dataclass
class Statement:
    """One ``CREATE`` statement: its clauses as written."""

    kind: str  # one of KINDS
    name: str
    at: str  # where the name is
    start: str  # where CREATE is
    if_not_exists: bool = False
    using: dict[str, list[Name]] = field(default_factory=dict)  # MODEL, TOOLS, AGENTS, FUNCTION, CONNECTION
    prompt: Token | None = None  # USING PROMPT '...'
    prompt_name: Name | None = None  # USING PROMPT p (a CREATE PROMPT's name)
    comment: Token | None = None
    options: dict[str, Option] = field(default_factory=dict)
    with_at: str | None = None
    columns: dict[str, list[Column]] = field(default_factory=dict)  # INPUT, OUTPUT
    target: Token | None = None  # CREATE FUNCTION f AS 'module:attr', CREATE PROMPT p AS 'text'
    language: Name | None = None
    clauses: dict[str, str] = field(default_factory=dict)  # clause -> where it was written


def parse_sql(text: str, source: str) -> list[Statement]:
    """The statements of ``text``; DefinitionError naming ``source``, line and column for
    SQL that does not parse."""
    parser = _Parser(_tokens(text, source), source)
    statements = []
    while not parser.at_end():
        if parser.accept_punct(";"):
            continue
        statements.append(parser.statement())
        if not parser.at_end():
            parser.expect_punct(";", "after the statement")
    if not statements:
        raise DefinitionError(f"{source}:1:1: no CREATE statement in the file")
    return statements


def _tokens(text: str, source: str) -> list[Token]:
    out: list[Token] = []
    line, line_start, pos = 1, 0, 0
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        at = f"{source}:{line}:{pos - line_start + 1}"
        if found is None:
            if text.startswith(("'", "`", "/*"), pos):
                raise DefinitionError(f"{at}: this {'comment' if text[pos] == '/' else 'quote'} is never "
                                      "closed")
            raise DefinitionError(f"{at}: unexpected character {text[pos]!r}")
        kind, raw = found.lastgroup or "", found.group()
        if kind == "string":
            out.append(Token("string", raw[1:-1].replace("''", "'"), at))
        elif kind == "quoted":
            out.append(Token("quoted", raw[1:-1].replace("``", "`"), at))
        elif kind in ("number", "word", "punct"):
            out.append(Token(kind, raw, at))
        newlines = raw.count("\n")
        if newlines:
            line += newlines
            line_start = pos + raw.rindex("\n") + 1
        pos = found.end()
    out.append(Token("end", "", f"{source}:{line}:{pos - line_start + 1}"))
    return out


class _Parser:
    def __init__(self, tokens: list[Token], source: str) -> None:
        self.tokens, self.i, self.source = tokens, 0, source

    @property
    def peek(self) -> Token:
        return self.tokens[self.i]

    def next(self) -> Token:
        token = self.tokens[self.i]
        if token.kind != "end":
            self.i += 1
        return token

    def at_end(self) -> bool:
        return self.peek.kind == "end"

    def is_word(self, *words: str) -> bool:
        return self.peek.kind == "word" and self.peek.text.upper() in words

    def accept_word(self, word: str) -> bool:
        if self.is_word(word):
            self.i += 1
            return True
        return False

    def accept_punct(self, punct: str) -> bool:
        if self.peek.kind == "punct" and self.peek.text == punct:
            self.i += 1
            return True
        return False

    def fail(self, expected: str) -> DefinitionError:
        token = self.peek
        got = "the end of the file" if token.kind == "end" else repr(token.text)
        return DefinitionError(f"{token.at}: expected {expected}, got {got}")

    def expect_word(self, word: str, why: str = "") -> Token:
        if not self.is_word(word):
            raise self.fail(f"{word}{' ' + why if why else ''}")
        return self.next()

    def expect_punct(self, punct: str, why: str = "") -> Token:
        if not (self.peek.kind == "punct" and self.peek.text == punct):
            raise self.fail(f"{punct!r}{' ' + why if why else ''}")
        return self.next()

    def string(self, what: str) -> Token:
        if self.peek.kind != "string":
            raise self.fail(f"{what} in single quotes")
        return self.next()

    def name(self, what: str) -> Name:
        """An identifier, possibly qualified (``catalog.db.name``: its last part counts)."""
        parts: list[Token] = []
        while True:
            if self.peek.kind not in ("word", "quoted"):
                raise self.fail(what)
            parts.append(self.next())
            if not self.accept_punct("."):
                return Name(parts[-1].text, parts[-1].at)

    def names(self, what: str) -> list[Name]:
        out = [self.name(what)]
        while self.accept_punct(","):
            out.append(self.name(what))
        return out

    def statement(self) -> Statement:
        start = self.expect_word("CREATE", "(a definition starts with CREATE)").at
        if not self.is_word(*KINDS):
            raise self.fail(" or ".join(KINDS))
        kind = self.next().text.upper()
        if_not_exists = False
        if self.accept_word("IF"):
            self.expect_word("NOT")
            self.expect_word("EXISTS")
            if_not_exists = True
        name = self.name(f"the name of the {kind.lower()}")
        stmt = Statement(kind, name.text, name.at, start, if_not_exists)
        while not self.at_end() and not (self.peek.kind == "punct" and self.peek.text == ";"):
            self.clause(stmt)
        return stmt

    def clause(self, stmt: Statement) -> None:
        token = self.peek
        if token.kind != "word":
            raise self.fail("a clause (USING, WITH, COMMENT, INPUT, OUTPUT, AS, LANGUAGE) or ';'")
        word = token.text.upper()
        if word == "USING":
            self.next()
            if not self.is_word("MODEL", "PROMPT", "TOOLS", "AGENTS", "FUNCTION", "CONNECTION"):
                raise self.fail("MODEL, PROMPT, TOOLS, AGENTS, FUNCTION or CONNECTION after USING")
            what = self.next().text.upper()
            self.once(stmt, f"USING {what}", token.at)
            if what == "PROMPT" and self.peek.kind == "string":
                stmt.prompt = self.string("the prompt")
            elif what == "PROMPT":
                stmt.prompt_name = self.name("the prompt's text, or the name of a prompt")
            elif what in ("TOOLS", "AGENTS"):
                stmt.using[what] = self.names(f"the name of {'a tool' if what == 'TOOLS' else 'an agent'}")
            else:
                stmt.using[what] = [self.name(f"the name of the {what.lower()}")]
        elif word == "WITH":
            self.next()
            self.once(stmt, "WITH", token.at)
            stmt.with_at = token.at
            stmt.options = self.options()
        elif word == "COMMENT":
            self.next()
            self.once(stmt, "COMMENT", token.at)
            stmt.comment = self.string("the comment")
        elif word in ("INPUT", "OUTPUT"):
            self.next()
            self.once(stmt, word, token.at)
            stmt.columns[word] = self.columns()
        elif word == "AS":
            self.next()
            self.once(stmt, "AS", token.at)
            stmt.target = self.string("the function, as 'module:attribute'")
        elif word == "LANGUAGE":
            self.next()
            self.once(stmt, "LANGUAGE", token.at)
            stmt.language = self.name("a language")
        else:
            raise self.fail("a clause (USING, WITH, COMMENT, INPUT, OUTPUT, AS, LANGUAGE) or ';'")

    @staticmethod
    def once(stmt: Statement, clause: str, at: str) -> None:
        if clause in stmt.clauses:
            raise DefinitionError(f"{at}: {clause} is given twice (first at {stmt.clauses[clause]})")
        stmt.clauses[clause] = at

    def options(self) -> dict[str, Option]:
        self.expect_punct("(", "after WITH")
        out: dict[str, Option] = {}
        while not self.accept_punct(")"):
            key = self.string("an option name")
            self.expect_punct("=", f"after {key.text!r}")
            value = self.value()
            if key.text in out:
                raise DefinitionError(f"{key.at}: option {key.text!r} is given twice (first at "
                                      f"{out[key.text].key_at})")
            out[key.text] = Option(key.text, _value(value), key.at, value.at)
            if not self.accept_punct(","):
                self.expect_punct(")", "or ',' between options")
                break
        return out

    def value(self) -> Token:
        token = self.peek
        if token.kind in ("string", "number") or self.is_word("TRUE", "FALSE"):
            return self.next()
        raise self.fail("a value ('text', a number, TRUE or FALSE)")

    def columns(self) -> list[Column]:
        self.expect_punct("(", "before the columns")
        out = []
        while True:
            name = self.name("a column name")
            type_token = self.peek
            if type_token.kind != "word":
                raise self.fail("the column's type")
            self.next()
            type_text = type_token.text.upper()
            if self.accept_punct("("):  # VARCHAR(100), DECIMAL(10, 2)
                sizes = []
                while self.peek.kind == "number":
                    sizes.append(self.next().text)
                    if not self.accept_punct(","):
                        break
                self.expect_punct(")", "after the type's size")
                type_text += f"({', '.join(sizes)})"
            out.append(Column(name.text, type_text, name.at))
            if not self.accept_punct(","):
                self.expect_punct(")", "or ',' between columns")
                return out


def _value(token: Token) -> str | int | float | bool:
    if token.kind == "number":
        return float(token.text) if any(c in token.text for c in ".eE") else int(token.text)
    if token.kind == "word":
        return token.text.upper() == "TRUE"
    return token.text


__all__ = ["KINDS", "Column", "Name", "Option", "Statement", "Token", "parse_sql"]
