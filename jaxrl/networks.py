"""Flax linen actor-critic networks and the action distributions they parametrise.

Params are always float32; layers compute in ``dtype`` (float32 or bfloat16); logits,
means, log-stds and values leave the network in float32, because softmax and log-probs
lose too much precision in bf16.
"""

from __future__ import annotations

from collections.abc import Sequence

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

ACTIVATIONS = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "elu": nn.elu,
    "gelu": nn.gelu,
    "silu": nn.silu,
}


class MLP(nn.Module):
    """Dense torso: ``[..., in] -> [..., hidden_sizes[-1]]``."""

    hidden_sizes: Sequence[int]
    activation: str = "tanh"
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        x = x.astype(self.dtype)
        for width in self.hidden_sizes:
            x = nn.Dense(
                width,
                kernel_init=nn.initializers.orthogonal(np.sqrt(2)),
                bias_init=nn.initializers.zeros,
                dtype=self.dtype,
                param_dtype=jnp.float32,
            )(x)
            x = act(x)
        return x


class ActorCritic(nn.Module):
    """Actor and critic on an MLP torso (shared or one each).

    ``__call__(obs [..., *obs_shape]) -> (policy_params, value [...])`` where
    ``policy_params`` is ``logits [..., num_actions]`` (discrete) or
    ``(mean [..., A], log_std [A])`` (continuous), all float32.
    """

    action_dim: int
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = False
    dtype: jnp.dtype = jnp.float32
    obs_ndim: int = 1  # trailing observation axes, flattened into one feature axis

    @nn.compact
    def __call__(self, obs: jax.Array):
        obs = obs.reshape(obs.shape[: obs.ndim - self.obs_ndim] + (-1,))
        torso = lambda name: MLP(self.hidden_sizes, self.activation, self.dtype, name=name)  # noqa: E731
        actor_h = torso("actor_torso")(obs)
        critic_h = actor_h if self.shared_torso else torso("critic_torso")(obs)
        head = lambda n, scale, name: nn.Dense(  # noqa: E731
            n,
            kernel_init=nn.initializers.orthogonal(scale),
            bias_init=nn.initializers.zeros,
            dtype=self.dtype,
            param_dtype=jnp.float32,
            name=name,
        )
        out = head(self.action_dim, 0.01, "actor_head")(actor_h).astype(jnp.float32)
        value = head(1, 1.0, "critic_head")(critic_h).astype(jnp.float32)[..., 0]
        if self.discrete:
            return out, value
        log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,), jnp.float32)
        return (out, log_std), value


def make_distribution(policy_params, discrete: bool) -> distrax.Distribution:
    """The action distribution for the network's float32 policy output."""
    if discrete:
        return distrax.Categorical(logits=policy_params)
    mean, log_std = policy_params
    return distrax.MultivariateNormalDiag(mean, jnp.broadcast_to(jnp.exp(log_std), mean.shape))
