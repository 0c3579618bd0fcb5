"""In-process runner and executor (no broker): ``LocalRunner(agent).run([...])``."""

from .executor import InProcessExecutor, import_target
from .runner import LocalRunner, RunFailedError

__all__ = ["InProcessExecutor", "LocalRunner", "RunFailedError", "import_target"]
