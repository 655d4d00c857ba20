"""Flax linen actor-critic networks, recurrent cores and the action distributions.

Every network call is sequence-shaped: ``obs [L, N, *obs_shape]`` with reset flags
``is_first [L, N]`` and a hidden state for the ``N`` sequences. Acting is the ``L = 1``
case; the feed-forward network is the same code with no core (its hidden state is the
empty tuple), so the trainer has a single code path.

Precision: params are always float32; layers compute in ``dtype`` (float32 or bfloat16);
logits, means, log-stds, values and the recurrent carries are float32 (softmax and
log-probs lose too much in bf16, and a bf16 carry would drift over long sequences).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.core.encoders import ObsEncoder

ACTIVATIONS = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "elu": nn.elu,
    "gelu": nn.gelu,
    "silu": nn.silu,
}


def _dense(features: int, scale: float, dtype: Any, name: str | None = None, bias=True):
    return nn.Dense(
        features,
        kernel_init=nn.initializers.orthogonal(scale),
        bias_init=nn.initializers.zeros,
        use_bias=bias,
        dtype=dtype,
        param_dtype=jnp.float32,
        name=name,
    )


class MLP(nn.Module):
    """Dense torso: ``[..., in] -> [..., hidden_sizes[-1]]``."""

    hidden_sizes: Sequence[int]
    activation: str = "tanh"
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        x = x.astype(self.dtype)
        for width in self.hidden_sizes:
            x = act(_dense(width, np.sqrt(2), self.dtype)(x))
        return x


class EntityEncoder(nn.Module):
    """Observation rows with entity blocks -> a fixed-size row that ignores the blocks' order.

    ``[B, layout.size] -> [B, F_own + sum over groups of (width + 1)]``: the row's own
    features (:attr:`jaxrl.envs.protocols.EntityLayout.own_features`) as they are, then per group
    (:class:`jaxrl.envs.protocols.EntityGroup`) every block through one shared
    ``relu(Dense(width))``, averaged over the present blocks (presence flag > 0.5; zeros where
    none is), and the present fraction of the group's blocks. The blocks of a group are
    interchangeable: the output does not depend on their order, and an absent block's features
    are never read. What the network learns about the one opponent of a 1v1 is then what it
    applies to each of three in a 3v3, instead of input weights for slots that 1v1 play leaves
    at zero.

    Mean pooling only, with relu: a max-pool beside the mean made the gradient and the soccer
    league markedly slower on a CPU (figures: docs/results/speed.md#why-the-code-is-as-it-is).
    """

    layout: Any  # jaxrl.envs.protocols.EntityLayout (static: it fixes the slicing)
    width: int  # features per encoded block
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = x.astype(self.dtype)
        own = self.layout.own_features
        breaks = np.flatnonzero(np.diff(own) != 1) + 1  # own features as slices, not a gather
        parts = [x[:, run[0] : run[-1] + 1] for run in np.split(own, breaks) if len(run)]
        for group in self.layout.groups:
            k, w = group.count, self.width
            kernel = self.param(
                f"{group.name}_kernel",
                nn.initializers.orthogonal(np.sqrt(2)),
                (group.width, w),
                jnp.float32,
            )
            bias = self.param(f"{group.name}_bias", nn.initializers.zeros, (w,), jnp.float32)
            blocks = x[:, group.offset : group.end].reshape(-1, k, group.width)
            h = nn.relu(blocks @ kernel.astype(self.dtype) + bias.astype(self.dtype))
            pf = (blocks[..., group.presence, None] > 0.5).astype(self.dtype)  # [B, K, 1]
            count = pf.sum(1)  # [B, 1]
            parts += [(h * pf).sum(1) / jnp.maximum(count, 1), count / k]
        return jnp.concatenate(parts, -1)


# ---- recurrent cores -----------------------------------------------------------------------
# The input projection of every time step is one matmul outside the time loop; only the
# hidden-to-hidden matmul and the gates run inside ``nn.scan``. On CPU the loop overhead
# per step dominates, so this halves the work inside the loop.


class _GRUStep(nn.Module):
    """One GRU step on a precomputed input projection; resets where ``is_first``."""

    size: int
    dtype: Any

    @nn.compact
    def __call__(self, h: jax.Array, inputs: tuple[jax.Array, jax.Array]):
        x_proj, is_first = inputs  # [N, 3H] (compute dtype), [N] bool
        h = jnp.where(is_first[:, None], 0.0, h)  # [N, H] float32
        h_proj = _dense(3 * self.size, 1.0, self.dtype, name="hidden")(h.astype(self.dtype))
        xr, xz, xn = jnp.split(x_proj.astype(jnp.float32), 3, axis=-1)
        hr, hz, hn = jnp.split(h_proj.astype(jnp.float32), 3, axis=-1)
        r = nn.sigmoid(xr + hr)
        z = nn.sigmoid(xz + hz)
        n = jnp.tanh(xn + r * hn)
        h = (1.0 - z) * n + z * h
        return h, h


class _LSTMStep(nn.Module):
    """One LSTM step on a precomputed input projection; resets where ``is_first``."""

    size: int
    dtype: Any

    @nn.compact
    def __call__(self, carry: tuple[jax.Array, jax.Array], inputs):
        x_proj, is_first = inputs  # [N, 4H], [N]
        c, h = (jnp.where(is_first[:, None], 0.0, s) for s in carry)
        h_proj = _dense(4 * self.size, 1.0, self.dtype, name="hidden")(h.astype(self.dtype))
        gates = x_proj.astype(jnp.float32) + h_proj.astype(jnp.float32)
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c = nn.sigmoid(f + 1.0) * c + nn.sigmoid(i) * jnp.tanh(g)  # forget bias 1
        h = nn.sigmoid(o) * jnp.tanh(c)
        return (c, h), h


class RecurrentCore(nn.Module):
    """GRU or LSTM over a sequence: ``(carry, x [L, N, F], is_first [L, N]) -> (carry, y)``.

    ``y`` is ``[L, N, H]``.

    The carry (float32) is reset to zeros at every step where ``is_first`` is set, inside
    the scanned cell, both while acting and while re-running stored sequences in the loss.
    """

    kind: str
    size: int
    dtype: Any = jnp.float32
    unroll: int = 1

    @nn.compact
    def __call__(self, carry, x: jax.Array, is_first: jax.Array):
        gates = 3 if self.kind == "gru" else 4
        x_proj = _dense(gates * self.size, 1.0, self.dtype, name="input")(x)
        step = _GRUStep if self.kind == "gru" else _LSTMStep
        scan = nn.scan(
            step,
            variable_broadcast="params",
            split_rngs={"params": False},
            in_axes=0,
            out_axes=0,
            unroll=self.unroll,
        )
        return scan(self.size, self.dtype, name="cell")(carry, (x_proj, is_first))

    @staticmethod
    def initial_carry(kind: str, size: int, batch: int):
        """Zeros: ``[N, H]`` (GRU) or ``([N, H], [N, H])`` (LSTM), float32."""
        zeros = lambda: jnp.zeros((batch, size), jnp.float32)  # noqa: E731
        return zeros() if kind == "gru" else (zeros(), zeros())


class ActorCritic(nn.Module):
    """Optional observation or entity encoder(s) -> MLP torso(s) -> optional recurrent
    core(s) -> heads.

    ``__call__(hidden, obs [L, N, *obs_shape], is_first [L, N])`` returns
    ``(hidden, policy_params, value [L, N])`` where ``policy_params`` is
    ``logits [L, N, num_actions]`` (discrete) or ``(mean [L, N, A], log_std [A])``
    (continuous), float32. ``hidden`` is ``()`` without a core, one core's carry with a
    shared torso, and ``(actor_carry, critic_carry)`` with separate torsos.
    """

    action_dim: int
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = False
    core: str = "none"
    core_size: int = 128
    core_unroll: int = 1
    dtype: Any = jnp.float32
    obs_ndim: int = 1  # trailing observation axes, flattened into one feature axis
    # jaxrl.envs.protocols.EntityLayout of an observation row, encoded by an EntityEncoder of
    # entity_width features per block before each torso; None or 0: rows go to the torso as
    # they are.
    entities: Any = None
    entity_width: int = 0
    # The observation's leaves (tuple of jaxrl.core.encoders.LeafEncoding: image leaves through a
    # CNN, the others flat), encoded by an ObsEncoder before each torso; None: rows go to the
    # torso as they are (vector observations: the graph and params of before the encoders).
    encoders: Any = None
    cnn_channels: Sequence[int] = (16,)  # the small CNN's channels per layer

    @nn.compact
    def __call__(self, hidden, obs: jax.Array, is_first: jax.Array):
        lead = obs.shape[: obs.ndim - self.obs_ndim]  # (L, N)
        # Dense layers run on [L * N, F]: XLA's CPU weight-gradient dot is much slower when it
        # contracts two batch axes of a [L, N, F] activation (docs/results/speed.md).
        x = obs.reshape((-1, int(np.prod(obs.shape[len(lead) :], dtype=int))))

        def torso(name: str):  # "actor_torso" -> [L * N, F] -> [L * N, hidden_sizes[-1]]
            mlp = MLP(self.hidden_sizes, self.activation, self.dtype, name=name)
            if self.encoders is not None:
                encoder = ObsEncoder(
                    self.encoders,
                    tuple(self.cnn_channels),
                    self.dtype,
                    name=name.replace("torso", "encoder"),
                )
                return lambda rows: mlp(encoder(rows))
            if not self.entity_width:
                return mlp
            encoder = EntityEncoder(
                self.entities, self.entity_width, self.dtype, name=name.replace("torso", "entities")
            )
            return lambda rows: mlp(encoder(rows))

        core = lambda name: RecurrentCore(  # noqa: E731
            self.core, self.core_size, self.dtype, self.core_unroll, name=name
        )

        def run_core(name, carry, h):  # [L * N, H] -> core over [L, N, H] -> [L * N, H']
            carry, h = core(name)(carry, h.reshape(lead + h.shape[1:]), is_first)
            return carry, h.reshape((-1,) + h.shape[2:])

        actor_h = torso("actor_torso")(x)
        if self.shared_torso:
            if self.core != "none":
                hidden, actor_h = run_core("core", hidden, actor_h)
            critic_h = actor_h
        else:
            critic_h = torso("critic_torso")(x)
            if self.core != "none":
                actor_carry, critic_carry = hidden
                actor_carry, actor_h = run_core("actor_core", actor_carry, actor_h)
                critic_carry, critic_h = run_core("critic_core", critic_carry, critic_h)
                hidden = (actor_carry, critic_carry)
        out = _dense(self.action_dim, 0.01, self.dtype, "actor_head")(actor_h)
        value = _dense(1, 1.0, self.dtype, "critic_head")(critic_h)
        out = out.astype(jnp.float32).reshape(lead + (self.action_dim,))
        value = value.astype(jnp.float32).reshape(lead)
        if self.discrete:
            return hidden, out, value
        log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,), jnp.float32)
        return hidden, (out, log_std), value

    def initial_hidden(self, batch: int):
        """The hidden state of ``batch`` fresh sequences (``()`` without a core)."""
        if self.core == "none":
            return ()
        carry = lambda: RecurrentCore.initial_carry(self.core, self.core_size, batch)  # noqa: E731
        # Distinct buffers per core: the runner state is donated leaf by leaf.
        return carry() if self.shared_torso else (carry(), carry())


MASKED_LOGIT = float(jnp.finfo(jnp.float32).min)  # the logit of an illegal action


def mask_logits(logits: jax.Array, legal: jax.Array | None) -> jax.Array:
    """``logits [..., n]`` with the illegal actions' (``legal [..., n]`` bool False) set to
    :data:`MASKED_LOGIT`: probability exactly 0, and no gradient reaches them (None: as is).

    The smallest float32, not ``-inf``: the softmax of a row with at least one legal action
    stays finite, and distrax's entropy drops the zero-probability terms, so the entropy is
    the one over the legal actions alone.
    """
    return logits if legal is None else jnp.where(legal, logits, MASKED_LOGIT)


def make_distribution(policy_params, discrete: bool, legal=None) -> distrax.Distribution:
    """The action distribution for the network's float32 policy output.

    ``legal``: bool ``[..., num_actions]`` legal actions of a discrete policy (an
    :class:`jaxrl.envs.protocols.ActionMaskEnv`), or None (every action legal).
    """
    if discrete:
        return distrax.Categorical(logits=mask_logits(policy_params, legal))
    mean, log_std = policy_params
    return distrax.MultivariateNormalDiag(mean, jnp.broadcast_to(jnp.exp(log_std), mean.shape))
