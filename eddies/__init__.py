"""Eddies: an event-sourced engine for AI agents on Kafka.

A tiny example, run in-process with no broker::

    from eddies import Agent, InputEvent, OutputEvent, LocalRunner, action

    class Echo(Agent):
        @action(InputEvent)
        def start(event, ctx):
            ctx.send_event(OutputEvent(output=event.input))

    LocalRunner(Echo()).run([("s1", "hello")])  # -> ["hello"]

Heavy integrations (Kafka, PyFlink, litellm, MCP, A2A) are imported lazily, so
``import eddies`` stays fast.
"""

from typing import TYPE_CHECKING, Any

from eddies.engine import (
    A2aServer,
    A2aTool,
    Agent,
    AgentPlan,
    ChatModelSetup,
    Document,
    DurableCall,
    DurableCallError,
    DurableCallUnknownError,
    EmbeddingModelSetup,
    FunctionTool,
    JournalMismatchError,
    McpPrompt,
    McpServer,
    McpTool,
    MemorySetSetup,
    Outcome,
    PlanError,
    Prompt,
    RagAgent,
    RagOptions,
    ReActAgent,
    ReActOptions,
    ReflectionAgent,
    ReflectionOptions,
    ResourceType,
    Result,
    RunnerContext,
    SessionMachine,
    SessionState,
    Subagent,
    SubagentSetup,
    SubagentTimeoutError,
    ToolNotApprovedError,
    action,
)
from eddies.events import (
    AgentEvent,
    ApprovalRequestEvent,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    CustomEvent,
    Event,
    Identity,
    InputEvent,
    MessageRole,
    OutputEvent,
    SignalEvent,
    ToolCall,
    ToolRequestEvent,
    ToolResponseEvent,
)

if TYPE_CHECKING:
    from eddies.connectors.local import LocalRunner, RunFailedError
    from eddies.connectors.models.embeddings import LiteLLMEmbeddingModel, OfflineEmbeddingModel
    from eddies.connectors.models.provider_limits import ProviderLimits
    from eddies.connectors.models.scripted import ScriptedChatModel
    from eddies.connectors.remote.external_subagents import A2ASubagentSetup, HttpSubagentSetup
    from eddies.connectors.skills.toolset import Skills
    from eddies.connectors.stores.blobs import FolderBlobStore
    from eddies.connectors.stores.embedded import EmbeddedVectorStore
    from eddies.connectors.stores.pgvector import PgVectorStore

__version__ = "0.1.0"

_LAZY = {
    "A2ASubagentSetup": "eddies.connectors.remote.external_subagents",
    "EmbeddedVectorStore": "eddies.connectors.stores.embedded",
    "FolderBlobStore": "eddies.connectors.stores.blobs",
    "HttpSubagentSetup": "eddies.connectors.remote.external_subagents",
    "LiteLLMEmbeddingModel": "eddies.connectors.models.embeddings",
    "LocalRunner": "eddies.connectors.local",
    "OfflineEmbeddingModel": "eddies.connectors.models.embeddings",
    "PgVectorStore": "eddies.connectors.stores.pgvector",
    "ProviderLimits": "eddies.connectors.models.provider_limits",
    "RunFailedError": "eddies.connectors.local",
    "ScriptedChatModel": "eddies.connectors.models.scripted",
    "Skills": "eddies.connectors.skills.toolset",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'eddies' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "A2ASubagentSetup",
    "A2aServer",
    "A2aTool",
    "Agent",
    "AgentEvent",
    "AgentPlan",
    "ApprovalRequestEvent",
    "ChatMessage",
    "ChatModelSetup",
    "ChatRequestEvent",
    "ChatResponseEvent",
    "CustomEvent",
    "Document",
    "DurableCall",
    "DurableCallError",
    "DurableCallUnknownError",
    "EmbeddedVectorStore",
    "EmbeddingModelSetup",
    "Event",
    "FolderBlobStore",
    "FunctionTool",
    "HttpSubagentSetup",
    "Identity",
    "InputEvent",
    "JournalMismatchError",
    "LiteLLMEmbeddingModel",
    "LocalRunner",
    "McpPrompt",
    "McpServer",
    "McpTool",
    "MemorySetSetup",
    "MessageRole",
    "OfflineEmbeddingModel",
    "Outcome",
    "OutputEvent",
    "PgVectorStore",
    "PlanError",
    "Prompt",
    "ProviderLimits",
    "RagAgent",
    "RagOptions",
    "ReActAgent",
    "ReActOptions",
    "ReflectionAgent",
    "ReflectionOptions",
    "ResourceType",
    "Result",
    "RunFailedError",
    "RunnerContext",
    "ScriptedChatModel",
    "SessionMachine",
    "SessionState",
    "SignalEvent",
    "Skills",
    "Subagent",
    "SubagentSetup",
    "SubagentTimeoutError",
    "ToolCall",
    "ToolNotApprovedError",
    "ToolRequestEvent",
    "ToolResponseEvent",
    "action",
]
