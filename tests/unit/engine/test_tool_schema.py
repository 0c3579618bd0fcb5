"""Function tools: complete JSON schemas from type hints and docstrings; arguments checked
before the call (a bad one is a tool error the model sees, and it may try again);
enums and pydantic models made from their JSON when called; injected arguments hidden
from the model and set from the config or short-term memory, over what it sends."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

import pytest
from pydantic import BaseModel, Field

from eddies import Agent, ChatModelSetup, FunctionTool, InputEvent, LocalRunner, ResourceType, action
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.engine.tool_args import ToolArgumentError, problem
from eddies.engine.tool_schema import docstring, parameters
from eddies.events import (
    CallKind,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    DurableCallRequest,
    MessageRole,
    OutputEvent,
    ToolCall,
)


class Size(enum.Enum):
    SMALL = "s"
    LARGE = "l"


class Address(BaseModel):
    street: str
    zip: int


class Order(BaseModel):
    items: list[str]
    ship_to: Address


@dataclass
class Window:
    start: int
    end: int = 0


class Filters(TypedDict):
    tag: str


def book(city: Literal["Oslo", "Lima"], nights: list[int], size: Size, rooms: dict[str, list[int]],
         note: str | None = None, span: tuple[int, int] = (0, 1), *extra: Any) -> str:
    """Book a room.

    It holds the room for a day.

    Args:
        city: Where to stay.
        nights: The nights, as day numbers,
            counted from 1.
        size (Size): How large.

    Returns:
        A confirmation.
    """
    return "booked"


def test_a_complete_schema_from_type_hints_and_the_docstring() -> None:
    params = parameters(book)
    props = params["properties"]
    assert props["city"] == {"type": "string", "enum": ["Oslo", "Lima"], "description": "Where to stay."}
    assert props["nights"] == {"type": "array", "items": {"type": "integer"},
                               "description": "The nights, as day numbers, counted from 1."}
    assert props["size"] == {"type": "string", "enum": ["s", "l"], "description": "How large."}
    assert props["rooms"] == {"type": "object",
                              "additionalProperties": {"type": "array", "items": {"type": "integer"}}}
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props["span"]["prefixItems"] == [{"type": "integer"}, {"type": "integer"}]
    assert params["required"] == ["city", "nights", "size", "rooms"]
    assert "extra" not in props
    assert docstring(book)[0] == "Book a room.\n\nIt holds the room for a day."


def test_pydantic_models_dataclasses_typed_dicts_and_annotated() -> None:
    def ship(order: Order, window: Window, filters: Filters,
             speed: Annotated[int, "Days to deliver."] = 2) -> str:
        """Ship it.

        :param order: What to ship.
        :param window: When.
        """
        return "ok"

    params = parameters(ship)
    props = params["properties"]
    assert props["order"]["properties"]["ship_to"] == {"$ref": "#/$defs/Address"}
    assert params["$defs"]["Address"]["required"] == ["street", "zip"]  # hoisted to the root
    assert props["order"]["description"] == "What to ship."
    assert props["window"]["required"] == ["start"] and props["window"]["description"] == "When."
    assert props["filters"] == {"type": "object", "properties": {"tag": {"type": "string"}},
                                "required": ["tag"]}
    assert props["speed"] == {"type": "integer", "description": "Days to deliver.", "default": 2}
    assert problem(params, {"order": {"items": ["a"], "ship_to": {"street": "x", "zip": "0150"}},
                            "window": {"start": 1}, "filters": {"tag": "t"}}) == \
        "order.ship_to.zip: expected integer, got '0150'"


@pytest.mark.parametrize(("arguments", "message"), [
    ({"city": "Paris", "nights": [1], "size": "s", "rooms": {}},
     "city: 'Paris' is not one of 'Oslo', 'Lima'"),
    ({"city": "Oslo", "nights": [1, "2"], "size": "s", "rooms": {}}, "nights[1]: expected integer, got '2'"),
    ({"city": "Oslo", "size": "s", "rooms": {}}, "nights: missing (required)"),
    ({"city": "Oslo", "nights": [True], "size": "s", "rooms": {}}, "nights[0]: expected integer, got True"),
    ({"city": "Oslo", "nights": [], "size": "s", "rooms": {"a": [1]}, "span": [1]},
     "span: expected 2 items, got 1"),
])
def test_arguments_are_checked_against_the_schema(arguments: dict[str, Any], message: str) -> None:
    assert problem(parameters(book), arguments) == message


CALLED: list[Any] = []


def reserve(size: Size, order: Order, account: str, region: str) -> str:
    """Reserve stock for an order."""
    CALLED.append((size, order, account, region))
    return f"{size.name} x{len(order.items)} for {account} in {region}"


class Shop(Agent):
    @action(InputEvent)
    def ask(event: InputEvent, ctx: Any) -> None:
        ctx.short_term_memory.set("account", "acct-7")
        ctx.send_event(ChatRequestEvent(model="llm", messages=[ChatMessage(content=event.input)]))

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def first_bad_then_good(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    """A model that calls with a bad size, reads the error, then calls right (and tries to
    set the injected account itself)."""
    results = [m.content for m in messages if m.role is MessageRole.TOOL]
    order = {"items": ["a", "b"], "ship_to": {"street": "Main", "zip": 1}}
    if not results:
        return ChatMessage(MessageRole.ASSISTANT, "", [
            ToolCall("c1", "reserve", {"size": "XL", "order": order})])
    if len(results) == 1:
        return ChatMessage(MessageRole.ASSISTANT, "", [
            ToolCall("c2", "reserve", {"size": "l", "order": order, "account": "someone-else"})])
    return ChatMessage(MessageRole.ASSISTANT, " | ".join(results))


def shop(**inject: str) -> Shop:
    agent = Shop("shop", config={"region": "eu-north"})
    agent.add_resource("reserve", ResourceType.TOOL, FunctionTool(reserve, inject=inject))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(first_bad_then_good))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["reserve"]))
    return agent


def test_a_bad_argument_is_a_tool_error_the_model_sees_and_injected_ones_win() -> None:
    CALLED.clear()
    agent = shop(account="memory:account", region="config:region")
    runner = LocalRunner(agent)
    assert set(runner.plan.tool("reserve").spec.parameters["properties"]) == {"size", "order"}
    [out] = runner.run([("s1", "reserve two")])
    bad, good = out.split(" | ")
    assert bad == "error: ToolArgumentError: tool 'reserve': size: 'XL' is not one of 's', 'l'"
    assert good == '"LARGE x2 for acct-7 in eu-north"'
    [(size, order, account, region)] = CALLED  # only the good call ran, with real types
    assert size is Size.LARGE and isinstance(order, Order) and order.ship_to.zip == 1
    assert (account, region) == ("acct-7", "eu-north")  # not what the model sent


class Kettle(BaseModel):
    code: str = Field(pattern="^[A-Z]{3}$")
    price: float = Field(le=60)


def quote(item: Kettle) -> str:
    """Quote an item."""
    return f"{item.code} at {item.price}"


def too_dear_then_right(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    results = [m.content for m in messages if m.role is MessageRole.TOOL]
    if len(results) < 2:
        item = {"code": "KTL", "price": 12 if results else 112}
        return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall(f"c{len(results)}", "quote", {"item": item})])
    return ChatMessage(MessageRole.ASSISTANT, " | ".join(results))


def test_a_limit_of_the_schema_is_a_tool_error_the_model_sees() -> None:
    """maximum, pattern, maxLength... (a pydantic model's Field limits): checked before the
    call like the rest, the error naming the field."""
    agent = Shop("quoter")
    agent.add_resource("quote", ResourceType.TOOL, quote)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(too_dear_then_right))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["quote"]))
    [out] = LocalRunner(agent).run([("s1", "quote a kettle")])
    assert out.split(" | ") == [
        "error: ToolArgumentError: tool 'quote': item.price: 112 is greater than the maximum of 60",
        '"KTL at 12.0"']


def test_a_missing_injected_value_is_a_tool_error() -> None:
    CALLED.clear()
    runner = LocalRunner(shop(account="memory:nobody", region="config:region"))
    [out] = runner.run([("s1", "reserve two")])
    assert "injected argument 'account': the memory has no 'nobody'" in out
    assert CALLED == []


def test_injection_is_checked_when_the_tool_is_made() -> None:
    with pytest.raises(ValueError, match="inject names 'user', which is not a parameter"):
        FunctionTool(reserve, inject={"user": "memory:u"})
    said = "must be 'config:KEY', 'memory:KEY', 'call:id', 'identity:user' or 'identity:tenant'"
    with pytest.raises(ValueError, match=said):
        FunctionTool(reserve, inject={"account": "env:USER"})
    with pytest.raises(ValueError, match=said):
        FunctionTool(reserve, inject={"account": "call:name"})
    with pytest.raises(ValueError, match=said):
        FunctionTool(reserve, inject={"account": "identity:email"})


def test_the_call_id_is_injected_by_the_executor_as_an_idempotency_key() -> None:
    """``call:id`` gives the tool its call's deterministic id; the model does not see the
    parameter, and the request (its digest, the journal) does not hold it."""
    CALLED.clear()
    runner = LocalRunner(shop(account="call:id", region="config:region"))
    assert set(runner.plan.tool("reserve").spec.parameters["properties"]) == {"size", "order"}
    runner.run([("s1", "reserve two")])
    [(_, _, key, region)] = CALLED
    [request] = [e.payload for e in runner.history if isinstance(e.payload, DurableCallRequest)
                 and e.payload.kind is CallKind.TOOL]
    assert (key, region) == (request.call_id, "eu-north")
    assert "account" not in request.args


def test_an_action_calling_a_tool_with_bad_arguments_gets_tool_argument_error() -> None:
    class Direct(Agent):
        @action(InputEvent)
        def go(event: InputEvent, ctx: Any) -> None:
            try:
                ctx.get_resource("reserve", ResourceType.TOOL).call(
                    size="XL", order={"items": [], "ship_to": {"street": "s", "zip": 1}},
                    account="a", region="r")
            except ToolArgumentError as err:
                ctx.send_event(OutputEvent(output=str(err)))

    agent = Direct("direct")
    agent.add_resource("reserve", ResourceType.TOOL, reserve)
    assert LocalRunner(agent).run([("s1", "x")]) == ["size: 'XL' is not one of 's', 'l'"]
