"""The pure engine: agents, actions, resources, plans, the session machine, durable calls.

No Kafka, no network, no threads, no event loop: ``apply(state, event) -> (state,
emitted)`` is deterministic and testable in microseconds.
"""

from . import approval, halts
from .agent import ActionSpec, Agent, action
from .approval import ToolNotApprovedError
from .context import Memory, Metrics, RunnerContext
from .durable import (
    DurableCall,
    DurableCallError,
    DurableCallUnknownError,
    JournalMismatchError,
    Outcome,
    SubagentTimeoutError,
    function_name,
)
from .embeddings import EmbeddingModelConnection, EmbeddingModelSetup
from .hooks import CallView, Hook, HookError, InputInfo, JudgeRequest, Refuse
from .journal import Journal
from .long_term_memory import MemorySet, MemorySetSetup
from .machine import SessionMachine, UnsupportedEventError
from .plan import AgentPlan, PlanError
from .prompts import McpPrompt, Prompt
from .rag import RagAgent, RagOptions
from .react import ReActAgent, ReActOptions
from .reflection import ReflectionAgent, ReflectionOptions
from .remote_tools import A2aServer, A2aTool, McpServer, McpTool
from .resources import ChatModelConnection, ChatModelSetup, FunctionTool, ResourceType, ToolSpec
from .state import SessionState
from .subagents import Result, Subagent, SubagentSetup
from .vector_stores import Document, VectorStore

__all__ = [
    "A2aServer",
    "A2aTool",
    "ActionSpec",
    "Agent",
    "AgentPlan",
    "CallView",
    "ChatModelConnection",
    "ChatModelSetup",
    "Document",
    "DurableCall",
    "DurableCallError",
    "DurableCallUnknownError",
    "EmbeddingModelConnection",
    "EmbeddingModelSetup",
    "FunctionTool",
    "Hook",
    "HookError",
    "InputInfo",
    "Journal",
    "JournalMismatchError",
    "JudgeRequest",
    "McpPrompt",
    "McpServer",
    "McpTool",
    "Memory",
    "MemorySet",
    "MemorySetSetup",
    "Metrics",
    "Outcome",
    "PlanError",
    "Prompt",
    "RagAgent",
    "RagOptions",
    "ReActAgent",
    "ReActOptions",
    "ReflectionAgent",
    "ReflectionOptions",
    "Refuse",
    "ResourceType",
    "Result",
    "RunnerContext",
    "SessionMachine",
    "SessionState",
    "Subagent",
    "SubagentSetup",
    "SubagentTimeoutError",
    "ToolNotApprovedError",
    "ToolSpec",
    "UnsupportedEventError",
    "VectorStore",
    "action",
    "approval",
    "function_name",
    "halts",
]
