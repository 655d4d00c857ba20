"""Research one-offs: peer comparisons, fidelity studies and GPU scripts that no user runs.

Not installed with ``jaxrl`` (only ``bench/``'s own modules are, as ``jaxrl.bench``); run
from a clone as ``python -m bench.research.<name>``. These modules import ``bench``'s
installed modules relatively (``from .. import figures``), never the other way round.
"""
