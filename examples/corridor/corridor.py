"""Corridor: walk right to the exit of a 1-D corridor (a gymnax-1.x env for jaxrl)."""

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl.envs.domains import Interval, param  # jaxrl's declared parameter ranges (optional)


@struct.dataclass
class EnvState(environment.EnvState):
    pos: jax.Array  # () int32, the agent's cell; time (steps taken) comes from EnvState


@struct.dataclass
class EnvParams(environment.EnvParams):
    length: int = param(6, Interval(2, 100))  # cells; the exit is the last one
    max_steps_in_episode: int = 20  # truncation


class Corridor(environment.Environment[EnvState, EnvParams]):
    """Obs float32 [2] (position / (length - 1), 1); actions 0 left, 1 right; reward -0.1 a
    step, +1 at the exit (which terminates)."""

    renderer = "corridor_render"  # optional: the module jaxrl render draws episodes with

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def reset_env(self, key, params):
        state = EnvState(time=jnp.int32(0), pos=jnp.int32(0))
        return self.get_obs(state, params), state

    def step_env(self, key, state, action, params):
        pos = jnp.clip(state.pos + 2 * action - 1, 0, params.length - 1).astype(jnp.int32)
        state = EnvState(time=state.time + 1, pos=pos)
        at_exit = pos == params.length - 1
        reward = jnp.where(at_exit, 1.0, -0.1).astype(jnp.float32)
        return self.get_obs(state, params), state, reward, at_exit, {}

    def get_obs(self, state, params=None, key=None):
        return jnp.array([state.pos / (params.length - 1), 1.0], jnp.float32)

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (2,), jnp.float32)
