"""Observation encoders (jaxrl/core/encoders.py): the CNNs against ``nn.Conv``, the leaf split,
``network.encoder``'s choice and errors, and two probes that need them to learn."""

from __future__ import annotations

from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.config import ConfigError, load_config
from jaxrl.core.encoders import ImageEncoder, LeafEncoding, ObsEncoder, plan_encoders
from jaxrl.core.networks import ActorCritic
from jaxrl.envs.probes import DictProbe
from jaxrl.envs.protocols import ObsLeaf, ObsLeaves
from jaxrl.hostenv.networks import ImageActorCritic, make_network
from jaxrl.hostenv.spaces import HostSpaces, host_encoder
from jaxrl.run.driver import train

REPO = Path(__file__).resolve().parents[1]


def _conv_kernel(dense_kernel: jax.Array, kernel: int, stride: int, channels: int) -> jax.Array:
    """A PatchConv's dense kernel as ``nn.Conv``'s ``[k, k, C, F]``: rows are ordered
    ``(a, b, p, q, c)`` for kernel offset ``(stride * a + p, stride * b + q)``."""
    size, out = kernel // stride, dense_kernel.shape[-1]
    k = dense_kernel.reshape(size, size, stride, stride, channels, out)
    return k.transpose(0, 2, 1, 3, 4, 5).reshape(kernel, kernel, channels, out)


def _reference(params, x, layers, padding: str) -> jax.Array:
    """The same layers as ``nn.Conv`` (NHWC), relu after each, flattened ``(h, w, c)``."""
    for i, (out, k, s) in enumerate(layers):
        dense = params[f"PatchConv_{i}"]["Dense_0"]
        kernel = _conv_kernel(dense["kernel"], k, s, x.shape[-1])
        conv = nn.Conv(out, (k, k), (s, s), padding=padding)
        x = nn.relu(conv.apply({"params": {"kernel": kernel, "bias": dense["bias"]}}, x))
    return x.reshape((x.shape[0], -1))


def test_nature_cnn_is_nn_conv_on_sizes_the_strides_do_not_divide():
    """38x41: each layer reads what a VALID ``nn.Conv`` reads (the last rows/columns dropped)."""
    x = jax.random.uniform(jax.random.key(0), (2, 38, 41, 3))
    features, variables = ImageEncoder("nature").init_with_output(jax.random.key(1), x)
    # 38 -> 8 -> 3 -> 1 rows, 41 -> 9 -> 3 -> 1 columns
    assert features.shape == (2, 1 * 1 * 64)
    layers = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
    want = _reference(variables["params"], x, layers, "VALID")
    np.testing.assert_allclose(features, want, atol=1e-5)


def test_small_cnn_is_nn_conv_same_stride_1():
    x = jax.random.normal(jax.random.key(2), (3, 7, 7, 3))
    encoder = ImageEncoder("small", channels=(4, 5))
    features, variables = encoder.init_with_output(jax.random.key(3), x)
    assert features.shape == (3, 7 * 7 * 5)  # SAME: the grid keeps its size
    want = _reference(variables["params"], x, ((4, 3, 1), (5, 3, 1)), "SAME")
    np.testing.assert_allclose(features, want, atol=1e-5)


def test_small_cnn_by_hand():
    """One 1-channel 3x3 conv of ones, bias 0, on a 3x3 image: each output sums its
    (zero-padded) neighbourhood."""
    x = jnp.arange(9.0).reshape(1, 3, 3, 1)
    params = {"PatchConv_0": {"Dense_0": {"kernel": jnp.ones((9, 1)), "bias": jnp.zeros(1)}}}
    got = ImageEncoder("small", channels=(1,)).apply({"params": params}, x)
    want = [[8, 15, 12], [21, 36, 27], [20, 33, 24]]  # e.g. corner 0+1+3+4, centre 0+...+8
    np.testing.assert_array_equal(got.reshape(3, 3), want)


def test_bf16_computes_in_bf16_with_float32_params():
    x = jnp.ones((1, 5, 5, 2))
    encoder = ImageEncoder("small", channels=(3,), dtype=jnp.bfloat16)
    features, variables = encoder.init_with_output(jax.random.key(0), x)
    assert features.dtype == jnp.bfloat16
    assert {leaf.dtype for leaf in jax.tree.leaves(variables)} == {jnp.dtype(jnp.float32)}


LEAVES = ObsLeaves(
    (
        ObsLeaf("pos", (2,), 0),
        ObsLeaf("grid", (4, 4, 2), 2),
        ObsLeaf("inventory", (3, 1), 34),
    )
)


def test_leaf_split_is_exact():
    """The row's image leaf reaches its CNN as the leaf, the others pass as they are."""
    pos = jnp.array([[1.5, -2.0]])
    grid = jax.random.normal(jax.random.key(4), (1, 4, 4, 2))
    inventory = jnp.array([[[7.0], [8.0], [9.0]]])
    row = jnp.concatenate([pos, grid.reshape(1, -1), inventory.reshape(1, -1)], -1)
    assert row.shape == (1, LEAVES.size)
    plan = plan_encoders("small", (LEAVES.size,), LEAVES)
    encoder = ObsEncoder(plan, channels=(3,))
    out, variables = encoder.init_with_output(jax.random.key(5), row)
    image = ImageEncoder("small", (3,)).apply({"params": variables["params"]["grid"]}, grid)
    np.testing.assert_array_equal(out, jnp.concatenate([pos, image, inventory[..., 0]], -1))


def test_parameters_are_named_by_leaf():
    env = DictProbe(size=6)
    plan = plan_encoders("auto", (38,), env.observation_leaves)
    assert [(leaf.name, leaf.kind) for leaf in plan] == [("grid", "small"), ("flag", "flat")]
    net = ActorCritic(action_dim=4, discrete=True, hidden_sizes=(8,), encoders=plan)
    params = net.init(jax.random.key(0), (), jnp.zeros((1, 2, 38)), jnp.zeros((1, 2), bool))
    params = params["params"]
    for side in ("actor", "critic"):
        assert list(params[f"{side}_encoder"]) == ["grid"]
        layers = params[f"{side}_encoder"]["grid"]
        assert list(layers) == ["PatchConv_0"]  # network.cnn_channels' default: (16,)
        assert layers["PatchConv_0"]["Dense_0"]["kernel"].shape == (9 * 1, 16)
        # the torso reads the 6x6x16 features and the 2 flag values
        assert params[f"{side}_torso"]["Dense_0"]["kernel"].shape == (6 * 6 * 16 + 2, 8)
    shared = ActorCritic(4, True, (8,), shared_torso=True, encoders=plan)
    shared_params = shared.init(jax.random.key(0), (), jnp.zeros((1, 2, 38)), jnp.zeros((1, 2)))
    assert "actor_encoder" in shared_params["params"]
    assert "critic_encoder" not in shared_params["params"]


@pytest.mark.parametrize(
    "shape, leaves, kinds",
    [
        ((84, 84, 4), None, ["nature"]),  # Atari frames
        ((63, 63, 3), None, ["nature"]),  # Craftax-Classic-Pixels
        ((10, 10, 4), None, ["small"]),  # MinAtar
        ((7, 7, 3), None, ["small"]),  # navix's symbolic view
        ((4,), None, None),  # a vector: the torso, as before
        ((40 * 40 * 3 + 5,), [("img", (40, 40, 3)), ("vec", (5,))], ["nature", "flat"]),
        ((7,), [("a", (3,)), ("b", (2, 2))], None),  # no image leaf: the flat row
    ],
)
def test_auto_picks(shape, leaves, kinds):
    if leaves is not None:
        offsets = np.cumsum([0] + [int(np.prod(s)) for _, s in leaves])[:-1]
        pairs = zip(leaves, offsets, strict=True)
        leaves = ObsLeaves(tuple(ObsLeaf(n, s, int(o)) for (n, s), o in pairs))
    plan = plan_encoders("auto", shape, leaves)
    assert (None if plan is None else [leaf.kind for leaf in plan]) == kinds
    assert plan_encoders("mlp", shape, leaves) is None


def test_plan_keeps_the_leaves_offsets():
    plan = plan_encoders("small", (LEAVES.size,), LEAVES)
    assert plan == (
        LeafEncoding("pos", (2,), 0, "flat"),
        LeafEncoding("grid", (4, 4, 2), 2, "small"),
        LeafEncoding("inventory", (3, 1), 34, "flat"),
    )


def _load(*overrides: str):
    return load_config(
        REPO / "configs" / "cartpole.yaml",
        ["train.progress_bar=false", "checkpoint.every_updates=0", *overrides],
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["env.name=jaxrl.envs.probes:PixelProbe", "network.encoder=nature"],
            "network.encoder: nature needs images of at least 36x36; jaxrl.envs.probes:PixelProbe "
            "observations are 12x12x1: use small or auto",
        ),
        (
            ["env.name=jaxrl.envs.probes:DictProbe", "network.encoder=nature"],
            "network.encoder: nature needs images of at least 36x36; jaxrl.envs.probes:DictProbe "
            "leaf 'grid' is 6x6x1: use small or auto",
        ),
        (
            ["network.encoder=small"],
            "network.encoder: small needs image observations [H, W, C]; CartPole-v1 "
            "observations are 4: use mlp or auto",
        ),
        (
            ["network.encoder=cnn"],
            "network.encoder must be one of auto, mlp, nature, small, got 'cnn'",
        ),
        (["network.cnn_channels=[]"], "network.cnn_channels must be positive channel counts"),
        (
            ["env.name=jaxrl.envs.probes:PixelProbe", "network.entity_width=8"],
            "network.entity_width: jaxrl.envs.probes:PixelProbe has image observations",
        ),
    ],
)
def test_a_network_that_does_not_fit_is_one_config_error(overrides, message):
    with pytest.raises(ConfigError) as err:
        _load(*overrides)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "shape, dtype, encoder, want",
    [
        ((4, 84, 84), "uint8", "auto", "nature"),  # Atari, as before the encoders were shared
        ((4, 84, 84), "uint8", "nature", "nature"),
        ((1, 20, 20), "uint8", "auto", "small"),
        ((4, 84, 84), "uint8", "mlp", None),
        ((3, 8, 8), "float32", "auto", None),  # not uint8 frames: flattened, as before
        ((4,), "float32", "auto", None),
    ],
)
def test_host_encoder(shape, dtype, encoder, want):
    spaces = HostSpaces(obs_shape=shape, obs_dtype=dtype, discrete=True, action_dim=2)
    assert host_encoder(encoder, spaces, "Host-v0") == want


def test_host_refuses_a_cnn_without_images():
    spaces = HostSpaces(obs_shape=(4,), obs_dtype="float32", discrete=True, action_dim=2)
    with pytest.raises(ConfigError, match=r"^network\.encoder: nature needs uint8 \[C, H, W\]"):
        host_encoder("nature", spaces, "CartPole-v1")


def test_host_atari_network_keeps_its_parameter_tree():
    """Checkpoints of host runs load as before: ``NatureEncoder_0/PatchConv_<i>`` and ``head``."""
    config = _load()
    spaces = HostSpaces(obs_shape=(4, 84, 84), obs_dtype="uint8", discrete=True, action_dim=6)
    net = make_network(config, spaces, jnp.float32, 1)
    assert isinstance(net, ImageActorCritic)
    obs = jnp.zeros((1, 1, 4, 84, 84), jnp.uint8)
    shapes = jax.eval_shape(net.init, jax.random.key(0), (), obs, jnp.zeros((1, 1), bool))
    params = shapes["params"]
    assert sorted(params) == ["NatureEncoder_0", "head"]
    kernels = [params["NatureEncoder_0"][f"PatchConv_{i}"]["Dense_0"]["kernel"] for i in range(3)]
    assert [k.shape for k in kernels] == [(256, 32), (512, 64), (576, 64)]
    assert params["head"]["actor_torso"]["Dense_0"]["kernel"].shape == (3136, 64)


def _learned(tmp_path, name: str, total_steps: int, *extra: str) -> float:
    """Mean episode return of the last chunk of a short run on ``name`` (one-step episodes)."""
    config = _load(
        f"env.name={name}",
        "env.num_envs=16",
        "ppo.num_steps=8",
        "ppo.num_minibatches=2",
        "network.hidden_sizes=[32]",
        "network.cnn_channels=[8]",
        "ppo.lr=3e-3",
        "ppo.anneal_lr=false",
        f"train.total_steps={total_steps}",
        "train.updates_per_chunk=8",
        *extra,
    )
    result = train(config, tmp_path / "run", quiet=True)
    return float(result.history[-1]["rollout/episode_return"])


def test_pixel_probe_learns_with_the_cnn(tmp_path):
    """Which half the bright pixel of a 12x12 image is in: 0.5 without reading the image."""
    assert _learned(tmp_path, "jaxrl.envs.probes:PixelProbe", 3072) > 0.9


def test_dict_probe_learns_from_both_leaves(tmp_path):
    """The action is ``2 * half + flag``: 0.5 at best from either leaf alone."""
    assert _learned(tmp_path, "jaxrl.envs.probes:DictProbe", 4096) > 0.9
