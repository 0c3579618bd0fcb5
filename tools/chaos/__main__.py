"""``python -m chaos``: run the campaign (see the package's docstring)."""

import sys

from .campaign import main

sys.exit(main())
