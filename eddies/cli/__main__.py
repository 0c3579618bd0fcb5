"""``python -m eddies.cli`` is the ``eddies`` command, as ``python -m eddies`` is."""

import sys

from eddies.cli import main

sys.exit(main())
