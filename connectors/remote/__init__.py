"""Tools and agents behind a network: MCP servers, A2A agents, HTTP and A2A sub-agents,
discovering their specs at start, the event-loop thread their clients run on, secrets
from the environment, and how a remote failure is classified."""
