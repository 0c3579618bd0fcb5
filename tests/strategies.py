"""Hypothesis strategies for every event payload and the envelope."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from eddies.events import (
    AgentEvent,
    ApprovalRequestEvent,
    CallKind,
    CallStatus,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    ContentBlock,
    ContentKind,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    CustomEvent,
    Document,
    DurableCallRequest,
    DurableCallResult,
    ErrorCategory,
    ErrorInfo,
    InputEvent,
    MessageRole,
    OutputEvent,
    SignalEvent,
    SubagentCallEvent,
    SubagentResultEvent,
    TokenUsage,
    ToolCall,
    ToolRequestEvent,
    ToolResponseEvent,
    ToolResult,
    encode_value,
)

text = st.text(max_size=30)
ints = st.integers(min_value=-(2**53), max_value=2**53)
json_values: Any = st.recursive(
    st.none() | st.booleans() | ints | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(text, json_values, max_size=4)
errors = st.none() | st.builds(ErrorInfo, text, text, st.booleans(), st.sampled_from(list(ErrorCategory)),
                               st.none() | st.integers(100, 599), st.none() | st.integers(0, 2**40))
tool_calls = st.builds(ToolCall, text, text, json_objects)
blocks = st.lists(st.builds(
    ContentBlock, st.sampled_from(list(ContentKind)), text, st.none() | text,
    st.none() | st.binary(max_size=40), st.none() | text, st.none() | text,
    st.none() | st.integers(0, 2**40)), max_size=2)
messages = st.builds(
    ChatMessage,
    st.sampled_from(list(MessageRole)),
    text,
    st.lists(tool_calls, max_size=2),
    st.none() | text,
    json_objects,
    blocks,
)
usage = st.none() | st.builds(TokenUsage, st.integers(0, 2**40), st.integers(0, 2**40),
                              st.none() | st.floats(0, 1e6, allow_nan=False),
                              st.integers(0, 2**40), st.integers(0, 1000))
args_text = st.builds(
    lambda a, k: encode_value({"args": a, "kwargs": k}), st.lists(json_values, max_size=3), json_objects
)

payloads = st.one_of(
    st.builds(InputEvent, json_values),
    st.builds(OutputEvent, json_values, errors, st.none() | text),
    st.builds(ChatRequestEvent, text, st.lists(messages, max_size=3), st.none() | json_objects),
    st.builds(ChatResponseEvent, text, messages, usage),
    st.builds(ToolRequestEvent, text, text, st.lists(tool_calls, max_size=3)),
    st.builds(
        ToolResponseEvent,
        text,
        st.lists(st.builds(ToolResult, text, text, json_values, errors, blocks), max_size=3),
    ),
    st.builds(SubagentCallEvent, text, text, json_values, st.none() | st.integers(0, 2**40)),
    st.builds(SubagentResultEvent, text, json_values, errors),
    st.builds(
        DurableCallRequest, text, st.sampled_from(list(CallKind)), text, args_text, st.booleans(),
        st.integers(1, 100), st.none() | st.integers(0, 2**40), text,
        st.none() | st.integers(0, 2**40),
    ),
    st.builds(
        DurableCallResult, text, st.sampled_from(list(CallKind)), st.sampled_from(list(CallStatus)),
        json_values.map(encode_value), errors, st.integers(1, 100),
    ),
    st.builds(CustomEvent, st.text(min_size=1, max_size=20).filter(lambda s: s not in _TAKEN), json_objects),
    st.builds(SignalEvent, text, json_values),
    st.builds(ApprovalRequestEvent, text, text, text, json_objects, st.none() | st.integers(0, 2**40)),
    st.builds(ContextRetrievalRequestEvent, text, text, st.integers(1, 100), st.none() | json_objects,
              st.none() | text),
    st.builds(ContextRetrievalResponseEvent, text, text, st.lists(st.builds(
        Document, text, json_objects, st.none() | text,
        st.none() | st.floats(-1, 1, allow_nan=False)), max_size=3)),
)

_TAKEN = {"InputEvent", "OutputEvent", "ChatRequestEvent", "ChatResponseEvent", "ToolRequestEvent",
          "ToolResponseEvent", "SubagentCallEvent", "SubagentResultEvent", "DurableCallRequest",
          "DurableCallResult", "CustomEvent", "SignalEvent", "ApprovalRequestEvent",
          "ContextRetrievalRequestEvent", "ContextRetrievalResponseEvent", "Reviewed"}


def _envelope(payload: Any, eid: str, sid: str, seq: int, run: int, scope: list[str],
              causation: str | None, action: str | None, ts: int) -> AgentEvent:
    from eddies.events import event_type_name

    return AgentEvent(eid, sid, seq, run, tuple(scope), event_type_name(payload), causation, action,
                      "agent", "1", ts, payload)


envelopes = st.builds(
    _envelope, payloads, text, text, st.integers(0, 2**62), st.integers(0, 2**31),
    st.lists(text, max_size=2), st.none() | text, st.none() | text,
    st.integers(0, 253_402_300_799_999),  # timestamp-millis up to year 9999
)


# Metadata values of every JSON kind the filters compare, with the clashes that matter:
# a boolean beside numbers, an int beside a float, a missing key beside null.
_META_VALUES = st.one_of(st.integers(-3, 3), st.sampled_from([1.5, -0.5, 2.0]), st.booleans(),
                         st.none(), st.sampled_from(["a", "b", "B", "é", "", "10", "9"]))
_META_KEYS = st.sampled_from(["k", "n", "s"])
metadata = st.dictionaries(_META_KEYS, _META_VALUES, max_size=3)
_META_ORDERED = st.one_of(st.integers(-3, 3), st.sampled_from([1.5, -0.5]), st.booleans(),
                          st.sampled_from(["a", "B", "é", "10"]))
_META_COMPARISON = st.one_of(
    st.tuples(st.sampled_from(["$eq", "$ne"]), _META_VALUES),
    st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), _META_ORDERED),
    st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(_META_VALUES, max_size=3)))
_META_LEAF = st.one_of(
    st.builds(lambda k, v: {k: v}, _META_KEYS, _META_VALUES),
    st.builds(lambda k, c: {k: {c[0]: c[1]}}, _META_KEYS, _META_COMPARISON))
metadata_filters = st.recursive(_META_LEAF, lambda inner: st.one_of(
    st.builds(lambda parts: {"$and": parts}, st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda parts: {"$or": parts}, st.lists(inner, min_size=1, max_size=3))), max_leaves=5)
