"""``python -m npusim.cli``: the ``npusim`` command."""

import sys

from npusim.cli import main

sys.exit(main())
