"""``AgentPlan``: an Agent checked and compiled into lookup tables for the machine.

Every error names the agent and the offending action or resource. Example::

    plan = AgentPlan.compile(MyAgent())
    plan.actions_for("InputEvent")  # -> (ActionSpec(...),)
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from eddies.events import CallKind, Event

from . import chat, retrieval
from .agent import ActionSpec, Agent, PlanError, Resource
from .budgets import Budget, budgets
from .embeddings import EmbeddingModelSetup
from .hooks import Hook
from .long_term_memory import MemorySetSetup, memory_tool_spec
from .prompts import McpPrompt, Prompt, check_prompt
from .remote_tools import A2aServer, A2aTool, McpServer, McpTool, RemoteTool, remote_names, remote_tools
from .resources import ChatModelSetup, FunctionTool, ResourceType, ToolSpec
from .retry import DEFAULT_POLICIES, DEFAULT_TIMEOUTS, RetryPolicy, call_timeouts, retry_policies
from .scope_paths import agent_of
from .subagents import PROMPT_SCHEMA, SubagentSetup
from .vector_stores import OPERATIONS, search_tool_spec

#: Engine options read from ``Agent(config=...)``, with their defaults.
OPTIONS: dict[str, Any] = {
    "max_events_per_run": 10_000,
    "max_tool_rounds": 10,
    # A session's short-term memory, as the JSON text of its keys and values: an action
    # whose writes would pass it fails and its writes are discarded (a runner must be able
    # to save the session, e.g. in one Kafka record).
    "max_memory_bytes": 524_288,
    # How long a call of a tool that requires approval waits for it (unless the tool sets
    # its own): an hour.
    "approval_timeout_ms": 3_600_000,
}


#: What an external sub-agent's executor deadline adds to the call's own timeout.
SUBAGENT_GRACE_MS = 2_000


@dataclass(frozen=True)
class AgentPlan:
    """A validated agent: actions by trigger type name, resources by name."""

    agent_name: str
    agent_version: str
    actions: dict[str, ActionSpec]
    by_type: dict[str, tuple[ActionSpec, ...]]
    resources: dict[str, tuple[ResourceType, Any]]
    config: dict[str, Any]
    #: How each kind of call is retried (the agent's ``retry`` config over the defaults).
    retry: dict[CallKind, RetryPolicy] = field(default_factory=lambda: dict(DEFAULT_POLICIES))
    #: How long executors let each kind of call run (the ``timeout_ms`` config).
    timeouts: dict[CallKind, int | None] = field(default_factory=lambda: dict(DEFAULT_TIMEOUTS))
    #: Spending limits by scope ("run", "session"): the ``budget`` config.
    budgets: dict[str, Budget] = field(default_factory=dict)
    #: The plans of its internal sub-agents (AGENT resources that are Agents), by name.
    subagents: dict[str, AgentPlan] = field(default_factory=dict, repr=False)
    #: Its hooks, in order: a sub-agent's caller's, then its own (see engine/hooks.py).
    hooks: tuple[Hook, ...] = ()
    #: Whether it or one of its sub-agents has hooks: an executor, which makes the calls
    #: of every scope, looks for the hooks of a call's scope only then.
    any_hooks: bool = False
    _tool_specs: dict[str, list[ToolSpec]] = field(default_factory=dict, compare=False, repr=False)
    _offered: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def compile(cls, agent: Agent, *, parent: AgentPlan | None = None,
                path: tuple[str, ...] = ()) -> AgentPlan:
        """Validate ``agent`` and build its plan; raises :class:`PlanError`, naming the
        agent. A sub-agent's plan (``parent``: its caller's; ``path``: the names of the
        agents above it) has its own resources first, then its parent's (other than
        sub-agents), and its parent's configuration under its own."""
        try:
            return cls._compile(agent, parent, path)
        except PlanError as err:
            if err.agent is None and agent.name:  # (a sub-agent's error names it already)
                _name(err, agent.name, path)
            raise

    @classmethod
    def _compile(cls, agent: Agent, parent: AgentPlan | None, path: tuple[str, ...]) -> AgentPlan:
        specs = list(agent.actions)
        if agent.builtin_actions:
            specs.extend([*chat.builtin_actions(), *retrieval.builtin_actions()])
        actions: dict[str, ActionSpec] = {}
        by_type: dict[str, list[ActionSpec]] = {}
        for spec in specs:
            if spec.name in actions:
                raise PlanError(f"action {spec.name!r}: two actions have this name")
            if not callable(spec.fn):
                raise PlanError(f"action {spec.name!r}: {spec.fn!r} is not callable")
            _check_signature(spec)
            if not spec.triggers:
                raise PlanError(f"action {spec.name!r}: no trigger event types given")
            actions[spec.name] = spec
            for trig in spec.triggers:
                by_type.setdefault(_type_name(spec, trig), []).append(spec)
        declared = list(agent.resources)
        if parent is None:
            declared += _general_purpose(declared)
        resources = _compile_resources(declared, {} if parent is None else {
            k: v for k, v in parent.resources.items() if v[0] is not ResourceType.AGENT})
        config = dict(OPTIONS) if parent is None else dict(parent.config)
        for key, value in agent.config.items():
            if key in OPTIONS and (not isinstance(value, int) or value <= 0):
                raise PlanError(f"config {key!r}: expected a positive integer, got {value!r}")
            config[key] = value
        try:
            retry = retry_policies(agent.config.get("retry"))
            timeouts = call_timeouts(agent.config.get("timeout_ms"))
            limits = budgets(agent.config.get("budget"))
        except ValueError as err:
            raise PlanError(str(err)) from None
        deadline = agent.config.get("request_timeout_ms")
        if deadline is not None and (not isinstance(deadline, int) or isinstance(deadline, bool)
                                     or deadline <= 0):
            raise PlanError(f"config 'request_timeout_ms': expected a positive number of ms, "
                            f"got {deadline!r}")
        if not agent.name:
            raise PlanError("agent: the name is empty")
        for hook in agent.hooks:
            if not isinstance(hook, Hook):
                raise PlanError(f"hook {hook!r}: not a Hook (subclass eddies.engine.hooks.Hook)")
        plan = cls(
            agent_name=agent.name,
            agent_version=agent.version,
            actions=actions,
            by_type={k: tuple(v) for k, v in by_type.items()},
            resources=resources,
            config=config,
            retry=retry,
            timeouts=timeouts,
            budgets=limits,
            hooks=(*(() if parent is None else parent.hooks), *agent.hooks),
        )
        # An agent class may check what it needs of the whole plan (a ReActAgent: its model).
        check = getattr(agent, "check_plan", None)
        if callable(check):
            check(plan)
        for hook in agent.hooks:  # and a hook, what it needs of its agent's (a judge: its model)
            check = getattr(hook, "check_plan", None)
            if callable(check):
                check(plan)
        for name, (rtype, obj) in resources.items():
            if rtype is ResourceType.CHAT_MODEL:
                check_prompt(plan, f"resource {name!r}", obj.prompt)
        here = (*path, agent.name)
        for name, (rtype, obj) in resources.items():
            if rtype is ResourceType.AGENT and isinstance(obj, Agent):
                if obj.name in here:
                    chain = " -> ".join((*here[here.index(obj.name):], obj.name))
                    raise PlanError(f"resource {name!r}: sub-agents call each other in a cycle: {chain}")
                if not obj.subagent_compatible:
                    raise PlanError(f"resource {name!r}: agent {obj.name!r} is not marked as a sub-agent "
                                    "(set subagent_compatible = True on its class, or pass "
                                    "subagent_compatible=True)")
                plan.subagents[name] = cls.compile(obj, parent=plan, path=here)
        if plan.hooks or any(sub.any_hooks for sub in plan.subagents.values()):
            object.__setattr__(plan, "any_hooks", True)  # known once its sub-agents are
        return plan

    def for_scope(self, scope: tuple[str, ...]) -> AgentPlan:
        """The plan of the sub-agent running in ``scope`` (each part ``name@call``)."""
        plan = self
        for part in scope:
            plan = plan.subagents[agent_of(part)]
        return plan

    def streams(self) -> bool:
        """Whether a model of this agent or of a sub-agent streams (``stream=True``): its
        executors then write answers and progress to the app's stream."""
        return (any(isinstance(obj, ChatModelSetup) and obj.stream for _, obj in self.resources.values())
                or any(sub.streams() for sub in self.subagents.values()))

    def actions_for(self, type_name: str) -> tuple[ActionSpec, ...]:
        """Actions triggered by events of ``type_name``, in declaration order."""
        return self.by_type.get(type_name, ())

    def resource(self, name: str, resource_type: ResourceType | None = None) -> Any:
        """The object of resource ``name``; a KeyError names what is missing."""
        entry = self.resources.get(name)
        if entry is None:
            raise KeyError(f"resource {name!r} is not defined")
        if resource_type is not None and entry[0] is not resource_type:
            raise KeyError(f"resource {name!r} is a {entry[0].value}, not a {resource_type.value}")
        return entry[1]

    def chat_model(self, name: str) -> ChatModelSetup:
        """The CHAT_MODEL resource ``name``."""
        setup: ChatModelSetup = self.resource(name, ResourceType.CHAT_MODEL)
        return setup

    def tool(self, name: str) -> FunctionTool | RemoteTool:
        """The TOOL resource ``name``: a function, or one tool of an MCP server or A2A agent."""
        tool: FunctionTool | RemoteTool = self.resource(name, ResourceType.TOOL)
        return tool

    def offered_tools(self, model: str) -> tuple[str, ...]:
        """The names of the tools chat model ``model`` may call (an MCP tool resource stands
        for its allowed tools, an A2A tool resource for its agent's tool); none for a name
        that is no chat model."""
        names = self._offered.get(model)
        if names is None:
            entry = self.resources.get(model)
            if entry is None or entry[0] is not ResourceType.CHAT_MODEL:
                return ()
            out: list[str] = []
            for t in entry[1].tools:  # a sub-agent (an AGENT resource) stands for itself
                if t not in self.resources:  # a sub-agent of the caller whose setup this is
                    continue
                rtype, obj = self.resources[t]
                if rtype is ResourceType.SKILLS:  # stands for its tools
                    out.extend(tool.name for tool in obj.tools())
                else:
                    out.extend(remote_names(obj) if isinstance(obj, McpTool | A2aTool) else (t,))
            names = self._offered[model] = tuple(out)
        return names

    def retry_for(self, kind: CallKind, target: str) -> RetryPolicy | None:
        """The retry policy of a call: the tool's own (an MCP or A2A tool's max_retries), else
        its kind's."""
        entry = self.resources.get(target)
        if entry is not None and kind is CallKind.TOOL and isinstance(entry[1], RemoteTool):
            return entry[1].retry
        return self.retry.get(kind)

    def call_timeout(self, kind: CallKind, target: str, kwargs: dict[str, Any] | None = None) -> int | None:
        """How long an executor lets a call run: the tool's or model setup's own
        ``timeout_ms``, an external sub-agent's (the call's ``timeout``, else its setup's,
        with a little more so that it ends the call itself and can cancel it there), else
        the agent's config for its kind (None: no limit)."""
        own = None
        entry = self.resources.get(target)
        if entry is not None and kind in (CallKind.TOOL, CallKind.CHAT_MODEL, CallKind.EMBEDDING,
                                          CallKind.VECTOR_STORE):
            own = getattr(entry[1], "timeout_ms", None)
        elif entry is not None and kind is CallKind.SUBAGENT and isinstance(entry[1], SubagentSetup):
            own = round(entry[1].timeout_of(kwargs) * 1000) + SUBAGENT_GRACE_MS
        return own if own is not None else self.timeouts.get(kind)

    def _tool_spec(self, name: str) -> ToolSpec:
        """What a model is told of tool ``name``: a tool's own spec, a sub-agent's prompt, a
        vector store's search, a memory set's remember and recall."""
        rtype, obj = self.resources[name]
        if rtype is ResourceType.AGENT:
            return subagent_spec(name, obj)
        if rtype is ResourceType.VECTOR_STORE:
            return search_tool_spec(name, obj)
        if rtype is ResourceType.MEMORY_SET:
            return memory_tool_spec(name, obj)
        return self.tool(name).spec

    def tool_specs(self, model: str) -> list[ToolSpec]:
        """Specs of the tools the chat model ``model`` may call (a new list each time)."""
        specs = self._tool_specs.get(model)
        if specs is None:
            specs = self._tool_specs[model] = [self._tool_spec(t) for t in self.offered_tools(model)]
        return list(specs)


def subagent_spec(name: str, agent: Agent | SubagentSetup) -> ToolSpec:
    """How a model is offered sub-agent ``name``: a tool taking one ``prompt`` (or what an
    external one's ``input_schema`` says)."""
    schema = agent.input_schema if isinstance(agent, SubagentSetup) and agent.input_schema else PROMPT_SCHEMA
    return ToolSpec(name, agent.description or f"Ask the {name} agent; it answers with its result.",
                    dict(schema))


def _type_name(spec: ActionSpec, trig: Any) -> str:
    if isinstance(trig, str):
        if not trig:
            raise PlanError(f"action {spec.name!r}: empty trigger type name")
        return trig
    if isinstance(trig, type) and issubclass(trig, Event):
        return trig.event_type
    raise PlanError(f"action {spec.name!r}: trigger {trig!r} is neither an Event class nor a name")


def _name(err: PlanError, agent: str, path: tuple[str, ...]) -> None:
    """Put the agent's name in front of ``err``'s message: a file or a worker may hold
    several agents, and "resource 'x': defined twice" alone does not say whose."""
    err.agent = agent
    message = str(err)
    # A ReActAgent's own checks already start "ReActAgent 'x': ...".
    if re.match(rf"\w*Agent {re.escape(repr(agent))}[ :(]", message):
        return
    who = f"agent {agent!r}" + (f" (a sub-agent of {path[-1]!r})" if path else "")
    err.args = (f"{who}: {message}", *err.args[1:])


def _check_signature(spec: ActionSpec) -> None:
    try:
        sig = inspect.signature(spec.fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(None, None)
    except TypeError:
        raise PlanError(
            f"action {spec.name!r}: must accept (event, ctx), has signature {sig}"
        ) from None


def _general_purpose(declared: list[Resource]) -> list[Resource]:
    """The built-in ``general-purpose`` sub-agent, on the first chat model declared, for an
    agent that has one and no resource of that name."""
    from .react import GENERAL_PURPOSE, general_purpose

    models = [r for r in declared if r.type is ResourceType.CHAT_MODEL and isinstance(r.obj, ChatModelSetup)]
    if not models or any(r.name == GENERAL_PURPOSE for r in declared):
        return []
    return [Resource(GENERAL_PURPOSE, ResourceType.AGENT, general_purpose(models[0].name))]


def _compile_resources(declared: list[Resource], inherited: dict[str, tuple[ResourceType, Any]]
                       ) -> dict[str, tuple[ResourceType, Any]]:
    out: dict[str, tuple[ResourceType, Any]] = {}
    for res in declared:
        if not res.name:
            raise PlanError("resource: empty name")
        if res.name in out:
            raise PlanError(f"resource {res.name!r}: defined twice")
        if res.type is ResourceType.AGENT and not isinstance(res.obj, Agent | SubagentSetup):
            raise PlanError(f"resource {res.name!r}: an AGENT must be an Agent or a SubagentSetup")
        if res.type is ResourceType.AGENT and ("@" in res.name or "/" in res.name):
            raise PlanError(f"resource {res.name!r}: a sub-agent's name may not hold '@' or '/'")
        if not isinstance(res.type, ResourceType):
            raise PlanError(f"resource {res.name!r}: {res.type!r} is not a ResourceType")
        obj = res.obj
        if res.type is ResourceType.TOOL and isinstance(obj, McpTool | A2aTool):
            out[res.name] = (res.type, obj)
            continue
        if res.type is ResourceType.TOOL and not isinstance(obj, FunctionTool):
            if not callable(obj):
                raise PlanError(f"resource {res.name!r}: a TOOL must be a function, a FunctionTool, "
                                "an McpTool or an A2aTool")
            obj = FunctionTool(obj, name=res.name)
        if res.type is ResourceType.CHAT_MODEL and not isinstance(obj, ChatModelSetup):
            raise PlanError(f"resource {res.name!r}: a CHAT_MODEL must be a ChatModelSetup")
        if res.type is ResourceType.CHAT_MODEL_CONNECTION and not callable(getattr(obj, "chat", None)):
            raise PlanError(f"resource {res.name!r}: a CHAT_MODEL_CONNECTION needs a chat() method")
        if res.type is ResourceType.EMBEDDING_MODEL and not isinstance(obj, EmbeddingModelSetup):
            raise PlanError(f"resource {res.name!r}: an EMBEDDING_MODEL must be an EmbeddingModelSetup")
        if (res.type is ResourceType.EMBEDDING_MODEL_CONNECTION
                and not callable(getattr(obj, "embed", None))):
            raise PlanError(f"resource {res.name!r}: an EMBEDDING_MODEL_CONNECTION needs an embed() "
                            "method")
        if res.type is ResourceType.MEMORY_SET and not isinstance(obj, MemorySetSetup):
            raise PlanError(f"resource {res.name!r}: a MEMORY_SET must be a MemorySetSetup")
        if res.type is ResourceType.PROMPT and not isinstance(obj, Prompt | McpPrompt | str):
            raise PlanError(f"resource {res.name!r}: a PROMPT must be a Prompt (Prompt.from_text, "
                            "Prompt.from_messages), an McpPrompt or a text")
        if res.type is ResourceType.SKILLS and not callable(getattr(obj, "tools", None)):
            raise PlanError(f"resource {res.name!r}: a SKILLS resource needs a tools() method "
                            "(eddies.connectors.skills.Skills)")
        if res.type is ResourceType.VECTOR_STORE:
            lacks = [m for m in OPERATIONS if not callable(getattr(obj, m, None))]
            if lacks or not isinstance(getattr(obj, "collection", None), str):
                raise PlanError(f"resource {res.name!r}: a VECTOR_STORE needs a collection and "
                                f"the methods {', '.join(OPERATIONS)} (it lacks "
                                f"{', '.join(lacks) or 'collection'})")
        out[res.name] = (res.type, obj)
    own = set(out)
    out = {**{k: v for k, v in inherited.items() if k not in own}, **out}
    for name, (rtype, obj) in list(out.items()):
        if name in own and isinstance(obj, McpTool | A2aTool):
            _add_remote_tools(out, name, obj)
        if name in own and rtype is ResourceType.SKILLS:
            _add_skill_tools(out, own, name, obj)
    for name, (rtype, obj) in out.items():
        if rtype is ResourceType.MEMORY_SET and name in own:
            store = out.get(obj.vector_store)
            if store is None or store[0] is not ResourceType.VECTOR_STORE:
                raise PlanError(f"resource {name!r}: vector_store {obj.vector_store!r} is not a "
                                "VECTOR_STORE resource of this agent")
            model = out.get(obj.compaction_model) if obj.compaction_model is not None else None
            if obj.compaction_model is not None and (model is None
                                                     or model[0] is not ResourceType.CHAT_MODEL):
                raise PlanError(f"resource {name!r}: compaction_model {obj.compaction_model!r} is not a "
                                "CHAT_MODEL resource of this agent")
        if rtype is ResourceType.VECTOR_STORE and name in own:
            emb = out.get(getattr(obj, "embedding_model", None) or "")
            if emb is None or emb[0] is not ResourceType.EMBEDDING_MODEL:
                raise PlanError(f"resource {name!r}: embedding_model "
                                f"{getattr(obj, 'embedding_model', None)!r} is not an "
                                "EMBEDDING_MODEL resource of this agent")
        if rtype is ResourceType.PROMPT and name in own and isinstance(obj, McpPrompt):
            server = out.get(obj.server)
            if server is None or server[0] is not ResourceType.MCP_SERVER:
                raise PlanError(f"resource {name!r}: server {obj.server!r} is not an MCP_SERVER resource "
                                "of this agent")
            obj.prompt  # noqa: B018  (a PlanError if it was not fetched)
        if rtype is ResourceType.EMBEDDING_MODEL and name in own:
            conn = out.get(obj.connection)
            if conn is None or conn[0] is not ResourceType.EMBEDDING_MODEL_CONNECTION:
                raise PlanError(f"resource {name!r}: connection {obj.connection!r} is not an "
                                "EMBEDDING_MODEL_CONNECTION resource of this agent")
        if rtype is not ResourceType.CHAT_MODEL or name not in own:  # inherited: checked above
            continue
        conn = out.get(obj.connection)
        if conn is None or conn[0] is not ResourceType.CHAT_MODEL_CONNECTION:
            raise PlanError(
                f"resource {name!r}: connection {obj.connection!r} is not a CHAT_MODEL_CONNECTION "
                "resource of this agent"
            )
        for tool in obj.tools:
            entry = out.get(tool)
            if entry is None or entry[0] not in _OFFERABLE:
                raise PlanError(f"resource {name!r}: tool {tool!r} is not a TOOL, AGENT, "
                                "VECTOR_STORE, SKILLS or MEMORY_SET resource")
        for fallback in obj.fallbacks:
            entry = out.get(fallback)
            if fallback == name or entry is None or entry[0] is not ResourceType.CHAT_MODEL:
                raise PlanError(f"resource {name!r}: fallback {fallback!r} is not another CHAT_MODEL "
                                "resource of this agent")
    return out


#: The resources a chat model setup may offer its model as tools.
_OFFERABLE = (ResourceType.TOOL, ResourceType.AGENT, ResourceType.VECTOR_STORE, ResourceType.SKILLS,
              ResourceType.MEMORY_SET)


def _add_skill_tools(out: dict[str, tuple[ResourceType, Any]], own: set[str], name: str,
                     skills: Any) -> None:
    """The tools of SKILLS resource ``name`` (load_skill, bash) as TOOLs of their own (over
    a caller's of the same names: a sub-agent's own skills are its own)."""
    for tool in skills.tools():
        if not isinstance(tool, FunctionTool):
            raise PlanError(f"resource {name!r}: its tools() must give FunctionTools, got {tool!r:.60}")
        if tool.name in own:
            raise PlanError(f"resource {name!r}: its tool {tool.name!r} has the name of a resource "
                            "of this agent (one SKILLS resource per agent)")
        out[tool.name] = (ResourceType.TOOL, tool)


def _add_remote_tools(out: dict[str, tuple[ResourceType, Any]], name: str,
                      tool: McpTool | A2aTool) -> None:
    """Each allowed tool of MCP tool resource ``name`` (the agent of A2A tool resource
    ``name``) as a TOOL of its own."""
    server = out.get(tool.server)
    mcp = isinstance(tool, McpTool)
    rtype, cls = (ResourceType.MCP_SERVER, McpServer) if mcp else (ResourceType.A2A_SERVER, A2aServer)
    if server is None or server[0] is not rtype or not isinstance(server[1], cls):
        raise PlanError(f"resource {name!r}: server {tool.server!r} is not an {rtype.name} resource "
                        f"(an {cls.__name__}) of this agent")
    if isinstance(tool, McpTool):
        missing = [t for t in tool.allowed_tools if t not in tool.discovered]
        if missing:
            raise PlanError(f"resource {name!r}: the tools of MCP server {tool.server!r} were not listed "
                            f"({', '.join(missing)}): runners list them when they start "
                            "(eddies.connectors.remote.discovery.discover_tools)")
    elif len(tool.discovered) != 1:
        raise PlanError(f"resource {name!r}: the agent card of A2A server {tool.server!r} was not "
                        "fetched: runners fetch it when they start "
                        "(eddies.connectors.remote.discovery.discover_tools)")
    for remote in remote_tools(name, tool):
        if remote.name in out:
            raise PlanError(f"resource {name!r}: {'MCP' if mcp else 'A2A'} tool {remote.name!r} has the "
                            "name of a resource of this agent"
                            + ("" if mcp else " (give the A2aTool another name=)"))
        out[remote.name] = (ResourceType.TOOL, remote)


__all__ = ["OPTIONS", "SUBAGENT_GRACE_MS", "AgentPlan", "PlanError", "subagent_spec"]
