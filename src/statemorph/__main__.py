"""``python -m statemorph``: the same command as the ``statemorph`` console script."""

import sys

from .cli import run

sys.exit(run())
