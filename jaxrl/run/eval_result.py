"""The result of evaluating a checkpointed policy, JAX or host run alike."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class EvalResult:
    """Returns of ``episodes`` independent episodes of a restored policy."""

    mean_return: float
    std_return: float
    mean_length: float
    returns: tuple[float, ...]
    step: int  # update step of the checkpoint
    episodes: int
    actions: str  # "sample" (from the policy) or "greedy" (its mode)
    outcomes: dict = dataclasses.field(default_factory=dict)  # mean env-reported outcomes
    seed: int | None = None  # the member's seed (runs with several members)
    member: str | None = None  # the member's name (its TensorBoard run)
    sweep: dict = dataclasses.field(default_factory=dict)  # the member's swept values

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return dataclasses.asdict(self)
