"""Skills: SKILL.md folders offered to models through the load_skill and bash tools."""
