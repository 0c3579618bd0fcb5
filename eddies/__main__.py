"""``python -m eddies`` is the ``eddies`` command."""

import sys

from eddies.cli import main

sys.exit(main())
