"""Make the repository root importable when pytest is run as ``pytest`` (not ``python -m``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
