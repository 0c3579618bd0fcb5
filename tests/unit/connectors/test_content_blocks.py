"""Content blocks: images, audio, files and resources beside a message's or a tool's text.
A tool's blocks travel in its outcome, reach the model's conversation in the tool's
message, are Avro in the session's events, go to an OpenAI-shaped model as content parts
(a tool's in a user message after it), and bytes over the size limit are not carried."""

from __future__ import annotations

import base64
from typing import Any

from eddies import (
    Agent,
    ChatModelSetup,
    FunctionTool,
    InputEvent,
    LocalRunner,
    OutputEvent,
    ResourceType,
    action,
)
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.litellm import to_openai_messages
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.engine.content import MAX_INLINE_BYTES, inline_block, split_blocks, with_blocks
from eddies.events import (
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    ContentBlock,
    ContentKind,
    MessageRole,
    ToolCall,
    ToolResponseEvent,
    decode,
    encode,
)

PNG = b"\x89PNG\r\n" + bytes(range(40))


def chart(city: str) -> Any:
    """A chart of a city's prices, as an image beside a caption."""
    return with_blocks(f"prices in {city}", [inline_block(ContentKind.IMAGE, PNG, mime_type="image/png")])


class Asker(Agent):
    """Asks the model, through the built-in chat action, and answers with its reply."""

    @action(InputEvent)
    def ask(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(ChatRequestEvent("llm", [ChatMessage(MessageRole.USER, event.input)]))

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def test_a_tools_image_reaches_the_model_and_is_avro_in_the_session() -> None:
    seen: list[list[ChatMessage]] = []

    def model(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
        seen.append(list(messages))
        if messages[-1].role is MessageRole.TOOL:
            return ChatMessage(MessageRole.ASSISTANT, f"I see {len(messages[-1].blocks)} picture")
        return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("t1", "chart", {"city": "Lisbon"})])

    agent = Asker("asker")
    agent.add_resource("chart", ResourceType.TOOL, FunctionTool(chart))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(model))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["chart"]))
    runner = LocalRunner(agent)
    assert runner.run([("s1", "how dear is Lisbon?")]) == ["I see 1 picture"]
    tool_message = seen[-1][-1]
    assert tool_message.content == '"prices in Lisbon"'
    [image] = tool_message.blocks
    assert (image.kind, image.mime_type, image.data, image.size) == (ContentKind.IMAGE, "image/png", PNG, 46)
    [response] = [e for e in runner.history if isinstance(e.payload, ToolResponseEvent)]
    again = decode(encode(response))  # the session's event, through Avro
    assert again.payload.responses[0].blocks == [image]
    assert again.payload.responses[0].result == "prices in Lisbon"
    assert replay(runner.plan, list(enumerate(runner.history)), "s1").ok


def test_bytes_over_the_limit_are_not_carried_and_the_block_says_so() -> None:
    big = inline_block(ContentKind.FILE, b"x" * (MAX_INLINE_BYTES + 1), mime_type="application/pdf",
                       uri="file:///guide.pdf")
    assert big.data is None and big.size == MAX_INLINE_BYTES + 1
    assert big.describe() == (f"[file application/pdf, {MAX_INLINE_BYTES + 1} bytes: not carried, "
                              "file:///guide.pdf]")
    small = inline_block(ContentKind.IMAGE, PNG, mime_type="image/png")
    assert small.describe() == "[image image/png, 46 bytes]"
    assert split_blocks(with_blocks({"a": 1}, [small, big])) == ({"a": 1}, [small, big])
    assert split_blocks({"result": 1}) == ({"result": 1}, [])  # a plain value stays itself
    assert with_blocks("x", []) == "x"


def test_blocks_become_openai_content_parts() -> None:
    image = ContentBlock(ContentKind.IMAGE, mime_type="image/png", data=PNG, size=len(PNG))
    audio = ContentBlock(ContentKind.AUDIO, mime_type="audio/wav", data=b"RIFF", size=4)
    link = ContentBlock(ContentKind.RESOURCE, uri="https://example.invalid/map.pdf", name="map")
    wire = to_openai_messages([
        ChatMessage(MessageRole.USER, "what is this?", blocks=[image]),
        ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("1", "a", {}), ToolCall("2", "b", {})]),
        ChatMessage(MessageRole.TOOL, "one", [], "1", blocks=[audio, link]),
        ChatMessage(MessageRole.TOOL, "two", [], "2", blocks=[image]),
        ChatMessage(MessageRole.ASSISTANT, "done"),
    ])
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert wire[0]["content"] == [{"type": "text", "text": "what is this?"},
                                  {"type": "image_url", "image_url": {"url": data_url}}]
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert wire[2]["content"] == "one" and wire[3]["content"] == "two"
    assert wire[4]["content"][1:] == [
        {"type": "input_audio", "input_audio": {"data": base64.b64encode(b"RIFF").decode(), "format": "wav"}},
        {"type": "image_url", "image_url": {"url": data_url}}]  # the link is in the text already
    text_only = to_openai_messages([ChatMessage(MessageRole.USER, "hi", blocks=[image])], media=False)
    assert text_only == [{"role": "user", "content": "hi"}]


def test_the_web_view_and_the_trace_show_blocks_as_placeholders() -> None:
    import json

    from eddies.connectors.inspect.summary import result_text
    from eddies.connectors.inspect.web import payload_data
    from eddies.events import CallKind, CallStatus, DurableCallResult, ToolResult, encode_value

    image = inline_block(ContentKind.IMAGE, PNG, mime_type="image/png")
    outcome = DurableCallResult("c1", CallKind.TOOL, CallStatus.OK,
                                encode_value(with_blocks("caption", [image])))
    assert result_text(outcome) == 'OK "caption" [image image/png, 46 bytes]'
    shown = payload_data(outcome)["value"]
    assert shown["eddies.blocks"][0]["data"] == "<46 bytes>"
    response = payload_data(ToolResponseEvent("r1", [ToolResult("t1", "chart", "x", None, [image])]))
    assert response["responses"][0]["blocks"][0]["data"] == "<46 bytes>"
    json.dumps(response)  # what the page is sent is JSON


def test_a_model_calls_arguments_are_as_before_for_messages_without_blocks() -> None:
    from eddies.engine.calls import message_args
    from eddies.events import EncodingError, encode_value

    plain = ChatMessage(MessageRole.TOOL, "3", [ToolCall("1", "add", {"a": 1})], "1", {"k": 1})
    # What a session journaled before messages had blocks: replaying it matches.
    assert encode_value(message_args(plain)) == (
        '{"role":"tool","content":"3","tool_calls":[{"id":"1","name":"add","arguments":{"a":1}}],'
        '"tool_call_id":"1","extra_args":{"k":1}}')
    saved = __import__("orjson").loads(encode_value(plain))  # as sensory memory keeps it
    assert encode_value(message_args(saved)) == encode_value(message_args(plain))
    with_image = ChatMessage(MessageRole.USER, "see", blocks=[inline_block(ContentKind.IMAGE, b"ab")])
    assert '"data":"YWI="' in encode_value(message_args(with_image))  # bytes as base64
    import pytest

    with pytest.raises(EncodingError):  # other bytes are still refused
        encode_value({"raw": b"ab"})


def test_a_folder_blob_store_keeps_bytes_by_their_hash(tmp_path: Any) -> None:
    import hashlib

    import pytest

    from eddies.connectors.models.litellm import content_part
    from eddies.connectors.stores.blobs import FolderBlobStore

    blobs = FolderBlobStore(tmp_path)
    big = bytes(range(256)) * 2000  # 512,000 bytes, over the inline limit
    uri = blobs.put(big)
    assert uri == "eddies-blob:sha256:" + hashlib.sha256(big).hexdigest()
    assert blobs.put(big) == uri and len(list(tmp_path.iterdir())) == 1  # once
    assert blobs.get(uri) == big
    block = inline_block(ContentKind.FILE, big, mime_type="application/pdf", uri="file:///g.pdf",
                         name="guide", blobs=blobs)
    assert (block.data, block.uri, block.text, block.size) == (None, uri, "file:///g.pdf", len(big))
    assert block.describe() == f"[file application/pdf guide, {len(big)} bytes, {uri}]"
    part = content_part(block, blobs)
    assert part is not None and part["file"]["file_data"].endswith(base64.b64encode(big).decode())
    assert content_part(block) is None  # without the store: nothing to add to the text
    (tmp_path / uri.rpartition(":")[2]).write_bytes(b"changed")
    with pytest.raises(ValueError, match="does not hash to its name"):
        blobs.get(uri)
    assert content_part(block, blobs) is None  # a broken blob is not sent
    with pytest.raises(KeyError):
        blobs.get("eddies-blob:sha256:" + "0" * 64)
    with pytest.raises(ValueError, match="not a blob reference"):
        blobs.get("eddies-blob:sha256:../../etc/passwd")
