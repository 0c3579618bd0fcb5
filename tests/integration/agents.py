"""Agents that integration tests run in worker subprocesses (importable by name)."""

from __future__ import annotations

import os

from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.demo import Calculator, calculator_agent


def http_calculator() -> Calculator:
    """The calculator on litellm, talking to the test's OpenAI-compatible server."""
    conn = LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test")
    return calculator_agent(conn, model_name="openai/test-model")
