"""In-process runner and executor (no broker): ``LocalRunner(agent).run([...])``."""

from eddies.connectors.local.executor import InProcessExecutor, import_target
from eddies.connectors.local.runner import LocalRunner, RunFailedError

__all__ = ["InProcessExecutor", "LocalRunner", "RunFailedError", "import_target"]
