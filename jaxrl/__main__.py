"""``python -m jaxrl <command> [args]``: the same as the ``jaxrl`` console script."""

import sys

from jaxrl.commands.cli import main

sys.exit(main())
