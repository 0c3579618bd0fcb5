"""Agents declared in files instead of Python: YAML in the shape of Apache Flink Agents'
(``yaml_agents``). Functions, tools and classes they name are imported from Python."""
