"""The env contract of :mod:`jaxrl.envs.protocols`: what each env declares, and that jaxrl asks it.

Shapes are checked abstractly (``jax.eval_shape``): nothing here compiles.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import envs
from jaxrl.envs import protocols
from jaxrl.envs.protocols import (
    EntityGroup,
    EntityLayout,
    EntityObservation,
    MultiAgentEnv,
    RenderableEnv,
    TwoTeamEnv,
    VariableTeamSize,
)

ROOT = Path(__file__).resolve().parents[1]

# What each of our envs declares (gymnax's envs are plain Envs).
DECLARED = {
    "Soccer": {MultiAgentEnv, TwoTeamEnv, VariableTeamSize, RenderableEnv, EntityObservation},
    "MettaArena": {MultiAgentEnv, RenderableEnv},
    "CAGE2": set(),
    "MemoryProbe": set(),
    "CartPole-masked-v1": set(),
    "CartPole-v1": set(),
}
CAPABILITIES = (MultiAgentEnv, TwoTeamEnv, VariableTeamSize, RenderableEnv, EntityObservation)


def _wrapped(env):
    return envs.EpisodeStatistics(envs.ActionRepeat(env, 2))


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_env_declares_its_capabilities(name):
    env, _ = envs.make(name)
    assert isinstance(env, protocols.Env)
    assert {p for p in CAPABILITIES if isinstance(env, p)} == DECLARED[name]
    # The helpers see the same through the trainer's wrappers.
    wrapped, inner = _wrapped(env), protocols.unwrapped(env)
    assert protocols.unwrapped(wrapped) is inner
    assert (protocols.two_team(wrapped) is inner) == (TwoTeamEnv in DECLARED[name])
    assert (protocols.variable_team_size(wrapped) is inner) == (VariableTeamSize in DECLARED[name])
    assert (protocols.renderer(wrapped) is not None) == (RenderableEnv in DECLARED[name])
    layout = protocols.entity_layout(wrapped)
    assert (layout is not None) == (EntityObservation in DECLARED[name])


@pytest.mark.parametrize("size", [1, 2, 3])
def test_soccer_entity_blocks_are_its_teammates_and_opponents(size):
    """The declared blocks sit where the observation has them: at N v N every active car's
    row shows N - 1 present teammates and N present opponents, each block led by its flag."""
    env, params = envs.make("Soccer")
    layout = protocols.entity_layout(env)
    assert layout.size == env.observation_space(params).shape[-1]
    assert [g.name for g in layout.groups] == ["teammates", "opponents"]
    obs, _ = env.reset(jax.random.key(size), env.with_team_size(params, size))
    obs = np.asarray(obs)
    active = [t * env.team_size + i for t in range(2) for i in range(size)]
    for group, present in zip(layout.groups, (size - 1, size), strict=True):
        blocks = obs[:, group.offset : group.end].reshape(len(obs), group.count, group.width)
        flags = blocks[..., group.presence]
        assert set(np.unique(flags)) <= {0.0, 1.0}
        np.testing.assert_array_equal(flags[active].sum(-1), present)
        # Absent blocks are all zeros (nothing for a network to read there).
        assert not np.any(blocks[active][flags[active] == 0])
    assert layout.own_features.tolist() == list(range(20))


def test_entity_layout_refuses_blocks_that_do_not_fit():
    group = EntityGroup("others", offset=2, count=2, width=3)
    assert group.end == 8
    assert EntityLayout(size=8, groups=(group,)).own_features.tolist() == [0, 1]
    with pytest.raises(ValueError, match="does not fit"):
        EntityLayout(size=7, groups=(group,))
    with pytest.raises(ValueError, match="does not fit"):
        EntityLayout(size=8, groups=(EntityGroup("x", 2, 2, 3, presence=3),))
    with pytest.raises(ValueError, match="overlap"):
        EntityLayout(size=12, groups=(group, EntityGroup("more", 7, 1, 3)))


@pytest.mark.parametrize("name", ["Soccer", "MettaArena", "CAGE2", "CartPole-v1"])
def test_agent_slots_match_the_shapes(name):
    """num_agents leads observations, actions and rewards; a single-agent env has none."""
    env, params = envs.make(name)
    agents = protocols.num_agents(_wrapped(env))
    obs, (_, _, reward, terminated, *_) = envs.abstract_step(env, params)
    obs_shape = tuple(env.observation_space(params).shape)
    assert obs.shape == obs_shape
    if isinstance(env, MultiAgentEnv):
        assert agents == env.num_agents > 1
        assert obs_shape[0] == agents and reward.shape == (agents,)
        assert envs.action_shape(env, params)[0] == agents
    else:
        assert agents == 1 and reward.shape == ()
    assert terminated.shape == ()


def test_two_team_env_contract():
    env, params = envs.make("Soccer")
    teams = protocols.two_team(env)
    assert teams.num_teams == 2 and teams.num_agents == 2 * teams.team_size
    obs, _ = jax.eval_shape(env.reset, jax.random.key(0), params)
    team_obs = jnp.zeros((teams.team_size, *obs.shape[1:]), obs.dtype)
    for kind in teams.scripted_kinds.values():
        actions = jax.eval_shape(
            teams.scripted_team_actions,
            jax.random.key(0),
            team_obs,
            jnp.int32(kind),
            jnp.float32(1.0),
        )
        assert actions.shape == (teams.team_size,) and actions.dtype == jnp.int32
    sized = protocols.variable_team_size(env)
    two = sized.with_team_size(params, 2)
    assert jax.tree.structure(two) == jax.tree.structure(params)
    assert int(two.blue_size) == int(two.orange_size) == 2


@pytest.mark.parametrize("name", ["Soccer", "MettaArena"])
def test_renderer_is_a_renderer(name):
    env, _ = envs.make(name)
    module = protocols.renderer(env)
    assert isinstance(module, protocols.Renderer)
    assert module.__name__ == env.renderer and module.STEP_DT > 0


def test_renderer_that_is_not_one_is_refused():
    class Broken(envs.MemoryProbe):
        renderer = "jaxrl.envs.params"  # a module without render_frames

    with pytest.raises(TypeError, match="not a renderer"):
        protocols.renderer(Broken())


def test_unwrap_state_reaches_the_env_state():
    env, params = envs.make("CartPole-v1")
    _, state = _wrapped(env).reset(jax.random.key(0), params)
    assert type(envs.unwrap_state(state)) is type(env.reset(jax.random.key(0), params)[1])


# ---- no capability probes in jaxrl ----------------------------------------------------------


def _protocol_members() -> set[str]:
    names = {"env_state", "unwrapped"}
    for _, cls in inspect.getmembers(protocols, inspect.isclass):
        # The Protocols' members (not the fields of the layout dataclasses beside them).
        if cls.__module__ == protocols.__name__ and getattr(cls, "_is_protocol", False):
            names |= set(cls.__dict__.get("__annotations__", {}))
            names |= {n for n, v in vars(cls).items() if not n.startswith("_") and callable(v)}
    names |= {"name", "default_params"}
    return names - {"step", "reset", "name", "default_params"}  # generic words


def env_probes(source: str, members: set[str]) -> list[str]:
    """``getattr``/``hasattr`` calls that probe an env capability: ``line: call``.

    A probe names a protocol member as a string (``hasattr(x, "with_team_size")``) or reads an
    attribute of something called env (``getattr(setup.env, name)``).
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
        ):
            continue
        target, attr = node.args[0], node.args[1]
        names_member = isinstance(attr, ast.Constant) and attr.value in members
        if names_member or "env" in ast.unparse(target).lower():
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_probe_finder_finds_probes():
    members = _protocol_members()
    assert {"num_agents", "num_teams", "team_size", "with_team_size", "renderer"} <= members
    source = (
        "a = getattr(setup.env, 'team_size', 1)\n"
        "b = hasattr(thing, 'with_team_size')\n"
        "c = getattr(self._env, key)\n"
        "d = getattr(err, 'problem_mark', None)\n"
        "e = getattr(hyper, name)\n"
    )
    assert [p.split(":")[0] for p in env_probes(source, members)] == ["1", "2", "3"]


def test_jaxrl_asks_the_protocols_instead_of_probing():
    members = _protocol_members()
    probes = {}
    for path in sorted((ROOT / "jaxrl").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        found = env_probes(path.read_text(), members)
        if found:
            probes[rel] = found
    assert probes == {}


def test_frames_render_from_states():
    """The protocol's render_frames draws uint8 frames from stacked states."""
    env, params = envs.make("Soccer")
    _, state = env.reset(jax.random.key(0), params)
    states = jax.tree.map(lambda x: np.stack([x, x]), jax.device_get(state))
    frames = protocols.renderer(env).render_frames(states, params)
    assert len(frames) == 2 and frames[0].dtype == np.uint8 and frames[0].shape[-1] == 3
