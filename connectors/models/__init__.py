"""Chat model connections (scripted offline model; litellm comes as an extra)."""
