"""XLand-MiniGrid (``pip install 'jaxrl[xminigrid]'``) as gymnax-1.x envs:
``env.name: xminigrid:<id>``.

xminigrid's envs step a ``TimeStep`` (``env.step(params, timestep, action)``, no auto-reset).
:class:`XMiniGrid` runs that step inside gymnax 1.x's ``Environment``, which auto-resets and
reports ``info["final_observation"]``:

- observation: float32 ``[V, V, 2]`` (tile id, colour id of the agent's ``V x V`` view,
  ``V = params.view_size``, 7 by default);
- action: ``Discrete(6)`` (forward, turn right, turn left, pick up, put down, toggle);
- reward: float32 ``()``, ``1 - 0.9 * steps / max_steps`` on reaching the goal, else 0;
- terminated: the goal is reached (xminigrid's ``discount == 0``);
- truncated: ``state.step_num >= params.max_steps``;
- state: xminigrid's ``TimeStep``; params: xminigrid's ``EnvParams`` (static fields: the
  grid size and view are fixed when the env is made, ``env.make_kwargs`` to ``xminigrid.make``).

The ``XLand-MiniGrid-*`` ids need a ruleset drawn from a benchmark, which
``xminigrid.load_benchmark`` downloads: they are refused by name.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from gymnax.environments import environment, spaces


def names() -> list[str]:
    """xminigrid's registered env ids."""
    import xminigrid  # noqa: PLC0415 - the suite is imported only when one of its envs is made

    return list(xminigrid.registered_environments())


class XMiniGrid(environment.Environment):
    """One xminigrid env on gymnax 1.x (see the module docstring for spaces and flags)."""

    def __init__(self, env_id: str, inner: Any, params: Any):
        super().__init__()
        self.env_id = env_id
        self.inner = inner  # xminigrid.environment.Environment
        self._params = params  # xminigrid's EnvParams from xminigrid.make

    @property
    def name(self) -> str:
        """``xminigrid:<id>``."""
        return f"xminigrid:{self.env_id}"

    @property
    def default_params(self) -> Any:
        """xminigrid's params, as ``xminigrid.make`` returned them."""
        return self._params

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        """A new episode; the state is xminigrid's ``TimeStep``."""
        timestep = self.inner.reset(params, key)
        return timestep.observation.astype(jnp.float32), timestep

    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any):
        """xminigrid's step (its ``discount == 0`` marks the goal)."""
        del key  # xminigrid's step is deterministic given the state
        nxt = self.inner.step(params, state, action)
        terminated = nxt.discount == 0.0
        reward = jnp.asarray(nxt.reward, jnp.float32)
        return nxt.observation.astype(jnp.float32), nxt, reward, terminated, {}

    def is_truncated(self, state: Any, params: Any) -> jax.Array:
        """xminigrid's time limit ``params.max_steps``."""
        return state.state.step_num >= params.max_steps

    def action_space(self, params: Any = None) -> spaces.Discrete:
        """gymnax ``Discrete(6)``."""
        return spaces.Discrete(self.inner.num_actions(params or self._params))

    def observation_space(self, params: Any) -> spaces.Box:
        """float32 ``Box(0, 12, [V, V, 2])``: tile and colour ids."""
        from xminigrid.core.constants import NUM_COLORS, NUM_TILES  # noqa: PLC0415

        high = float(max(NUM_TILES, NUM_COLORS) - 1)
        shape = tuple(self.inner.observation_shape(params))
        return spaces.Box(0.0, high, shape, jnp.float32)

    @property
    def num_actions(self) -> int:
        """6."""
        return int(self.inner.num_actions(self._params))


def make(env_id: str, **make_kwargs: Any) -> XMiniGrid:
    """xminigrid env ``env_id``; ``make_kwargs`` go to ``xminigrid.make`` (e.g. ``view_size``).

    Raises:
      ValueError: one line, for an ``XLand-MiniGrid-*`` id (its rulesets are downloaded).
    """
    if env_id.startswith("XLand-"):
        raise ValueError(
            f"xminigrid:{env_id} needs a ruleset from a benchmark that xminigrid.load_benchmark "
            "downloads; jaxrl makes only the MiniGrid-* ids by name"
        )
    import xminigrid  # noqa: PLC0415

    inner, params = xminigrid.make(env_id, **make_kwargs)
    return XMiniGrid(env_id, inner, params)
