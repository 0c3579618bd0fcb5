"""The HTTP door (eddies serve): inputs, Server-Sent Events of a session, approvals and
signals, history, and an OpenAI-compatible chat completions endpoint over an app's topics."""
