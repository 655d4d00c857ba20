"""The single-agent suites by name (envs/suites: craftax, navix, xminigrid, brax, playground),
the legacy five-value adapter (envs/suites/legacy.py) and foreign spaces (envs/suites/spaces.py).

A suite's tests skip when its package is missing; each suite's env is compiled once (a
module-scoped fixture) and stepped a few times under ``jit(vmap(...))``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnax.environments import spaces

from jaxrl import envs
from jaxrl.envs import protocols, suites
from jaxrl.envs.suites.legacy import LegacyStep
from jaxrl.envs.suites.spaces import to_gymnax_space

REPO = Path(__file__).resolve().parents[1]
NUM_ENVS = 2
STEPS = 3


# ----------------------------------------------------------------- foreign spaces


class Discrete:  # a suite's own copy of gymnax's Discrete (Craftax's, Kinetix's)
    def __init__(self, n, shape=()):
        self.n, self.shape = n, shape


class Continuous:  # Navix's: minimum, maximum
    def __init__(self, minimum, maximum, shape):
        self.minimum, self.maximum, self.shape, self.dtype = minimum, maximum, shape, jnp.float32


class Strange:
    pass


def test_to_gymnax_space_maps_a_suites_own_spaces():
    actions = to_gymnax_space(Discrete(17))
    assert isinstance(actions, spaces.Discrete) and actions.n == 17
    grid = to_gymnax_space(Discrete(9, (5, 5, 3)))  # Navix's observation grid of categories
    assert isinstance(grid, spaces.Box) and grid.shape == (5, 5, 3)
    assert (grid.low, grid.high, grid.dtype) == (0.0, 8.0, jnp.float32)
    box = to_gymnax_space(Continuous(-2.0, 3.0, (4,)))
    assert isinstance(box, spaces.Box) and (box.low, box.high, box.shape) == (-2.0, 3.0, (4,))
    own = spaces.Discrete(3)
    assert to_gymnax_space(own) is own


def test_to_gymnax_space_refuses_an_unknown_class_in_one_line():
    with pytest.raises(ValueError, match=r"cannot map space .*Strange") as err:
        to_gymnax_space(Strange())
    assert "\n" not in str(err.value)


# ----------------------------------------------------------------- the legacy adapter


@struct.dataclass
class CounterParams:
    limit: int = 3  # done when the count reaches this


class LegacyCounter:
    """A gymnax < 1.0 env: ``step`` returns five values and auto-resets by itself.

    obs int32 [1] = count; reward = count after the step; done when count == limit.
    """

    name = "LegacyCounter"
    default_params = CounterParams()

    def reset(self, key, params):
        del key, params
        return jnp.zeros(1, jnp.int32), jnp.int32(0)

    def step(self, key, state, action, params):
        del key
        count = state + 1 + action
        done = count >= params.limit
        state = jnp.where(done, 0, count)
        return state[None], state, count, done, {"count": count}

    def action_space(self, params):
        return Discrete(2)

    def observation_space(self, params):
        return Discrete(4, (1,))


class FourValues(LegacyCounter):
    def step(self, key, state, action, params):
        return super().step(key, state, action, params)[:4]


class NeedsArguments(LegacyCounter):
    def __init__(self, size):
        self.size = size


def test_a_five_value_env_by_import_path_is_wrapped_with_exact_values():
    env, params = envs.make(f"{__name__}:LegacyCounter")
    assert isinstance(env, LegacyStep)
    assert env.action_space(params).n == 2
    assert env.observation_space(params).dtype == jnp.float32
    obs, state = env.reset(jax.random.key(0), params)
    assert obs.dtype == jnp.float32
    seen = []
    for _ in range(4):  # counts 1, 2, 3 (done, reset to 0), 1
        obs, state, reward, terminated, truncated, info = env.step(
            jax.random.key(1), state, 0, params
        )
        seen.append((float(obs[0]), float(reward), bool(terminated), bool(truncated)))
        assert reward.dtype == jnp.float32 and terminated.dtype == jnp.bool_
        assert float(info["final_observation"][0]) == float(obs[0])
    assert seen == [
        (1.0, 1.0, False, False),
        (2.0, 2.0, False, False),
        (0.0, 3.0, True, False),
        (1.0, 1.0, False, False),
    ]


def test_a_step_of_another_arity_is_one_line_naming_the_env():
    with pytest.raises(ValueError, match=r"FourValues'.*returned 4 values; expected 6") as err:
        envs.make(f"{__name__}:FourValues")
    assert "\n" not in str(err.value)


def test_a_class_that_needs_arguments_given_none_is_one_line():
    with pytest.raises(ValueError, match=r"needs arguments, none were given .*'size'") as err:
        envs.make(f"{__name__}:NeedsArguments")
    assert "\n" not in str(err.value)
    env, _ = envs.make(f"{__name__}:NeedsArguments", make_kwargs={"size": 3})
    assert env.unwrapped.size == 3


# ----------------------------------------------------------------- the suite table


def test_a_missing_package_names_the_pip_command(monkeypatch):
    ghost = suites.Suite("ghost", "no_such_package_jaxrl", "ghost", "jaxrl.envs.suites.ghost")
    monkeypatch.setitem(suites.SUITES, "ghost", ghost)
    with pytest.raises(ValueError, match=r"^the ghost suite needs its package.*") as err:
        envs.make("ghost:Anything-v0")
    assert str(err.value).endswith("pip install 'jaxrl[ghost]'")


@pytest.mark.parametrize("prefix", ["popgym_arcade", "kinetix"])
def test_a_suite_that_conflicts_with_our_pins_is_refused_in_one_line(prefix):
    with pytest.raises(ValueError, match=rf"^the {prefix} suite cannot be used with jaxrl: ") as e:
        envs.make(f"{prefix}:Anything-v0")
    assert "\n" not in str(e.value) and "jax" in str(e.value)


def test_an_unknown_id_lists_names_with_a_close_match():
    pytest.importorskip("navix")
    with pytest.raises(ValueError, match=r"did you mean navix:Navix-DoorKey-5x5-v0\?"):
        envs.make("navix:Navix-DoorKey-5x5-v9")


def test_make_kwargs_reach_the_suites_constructor():
    pytest.importorskip("navix")
    env, params = envs.make("navix:Navix-Empty-5x5-v0", make_kwargs={"max_steps": 7})
    assert params.max_steps_in_episode == 7
    rgb, params = envs.make(
        "navix:Navix-Empty-5x5-v0",
        make_kwargs={"observation_fn": "navix.observations:rgb_first_person"},
    )
    assert rgb.observation_space(params).shape == (7 * 8, 7 * 8, 3)  # 7x7 view of 8px tiles
    assert float(rgb.observation_space(params).high) == 255.0


# ----------------------------------------------------------------- each suite's contract

# (env name, make_kwargs, observation shape, action space kind, its size)
CASES = {
    "craftax": ("craftax:Craftax-Classic-Symbolic-v1", {}, (1345,), spaces.Discrete, 17),
    "navix": ("navix:Navix-DoorKey-5x5-v0", {}, (5, 5, 3), spaces.Discrete, 7),
    "xminigrid": ("xminigrid:MiniGrid-Empty-5x5", {"view_size": 3}, (3, 3, 2), spaces.Discrete, 6),
    "brax": ("brax:inverted_pendulum", {}, (4,), spaces.Box, 1),
    "mujoco_playground": ("playground:CartpoleBalance", {}, (5,), spaces.Box, 1),
}


LIMIT = 2  # every suite's time limit in the contract run: truncated at the second step


def short_episodes(suite, env, params):
    """``(env, params)`` with a time limit of :data:`LIMIT` steps."""
    if suite == "xminigrid":  # its limit is static: made again with max_steps
        name, make_kwargs, *_ = CASES[suite]
        return envs.make(name, make_kwargs={**make_kwargs, "max_steps": LIMIT})
    field = "max_timesteps" if suite == "craftax" else "max_steps_in_episode"
    return env, params.replace(**{field: LIMIT})


def rollout(env, params, state, key):
    """``STEPS`` vmapped steps with sampled actions (one compiled scan)."""

    def one(carry, key):
        keys = jax.random.split(key, 2 * NUM_ENVS)
        actions = jax.vmap(env.action_space(params).sample)(keys[:NUM_ENVS])
        out = jax.vmap(env.step, (0, 0, 0, None))(keys[NUM_ENVS:], carry, actions, params)
        obs, state, reward, terminated, truncated, info = out
        return state, (obs, reward, terminated, truncated, info["final_observation"])

    return jax.lax.scan(one, state, jax.random.split(key, STEPS))


def kill_first(suite, state):
    """Craftax: env 0 starts dead (health 0), so its first step terminates."""
    if suite != "craftax":
        return state
    return state.replace(player_health=state.player_health.at[0].set(0))


@pytest.fixture(scope="module", params=list(CASES))
def suite_run(request):
    pytest.importorskip(request.param)
    name, make_kwargs, *_ = CASES[request.param]
    env, params = short_episodes(request.param, *envs.make(name, make_kwargs=make_kwargs))
    reset = jax.jit(jax.vmap(env.reset, (0, None)))
    obs, state = reset(jax.random.split(jax.random.key(0), NUM_ENVS), params)
    state = kill_first(request.param, state)
    _, out = jax.jit(lambda s, k: rollout(env, params, s, k))(state, jax.random.key(1))
    return request.param, env, params, obs, out


def test_a_suite_env_by_name_meets_the_gymnax_contract(suite_run):
    suite, env, params, obs, (step_obs, reward, terminated, truncated, final_obs) = suite_run
    _, _, shape, kind, size = CASES[suite]
    assert isinstance(env, protocols.Env) and not isinstance(env, LegacyStep)
    space = env.action_space(params)
    assert isinstance(space, kind)
    assert (space.n if kind is spaces.Discrete else space.shape[0]) == size
    assert tuple(env.observation_space(params).shape) == shape
    assert env.observation_space(params).dtype == jnp.float32
    assert obs.shape == (NUM_ENVS, *shape) and obs.dtype == jnp.float32
    assert step_obs.shape == (STEPS, NUM_ENVS, *shape) and step_obs.dtype == jnp.float32
    assert final_obs.shape == step_obs.shape
    assert reward.shape == (STEPS, NUM_ENVS) and reward.dtype == jnp.float32
    assert terminated.dtype == jnp.bool_ and truncated.dtype == jnp.bool_
    assert bool(jnp.isfinite(step_obs).all() and jnp.isfinite(reward).all())


def test_a_suite_time_limit_is_truncation_not_termination(suite_run):
    suite, *_, (_, _, terminated, truncated, _) = suite_run
    # Env 1 of every suite: truncated at the second step, then a fresh episode; never
    # terminated by the limit. Craftax's env 0 started dead: terminated at once, then its
    # new episode is cut at its second step (the third of the run).
    assert truncated[:, 1].tolist() == [False, True, False]
    assert not bool(terminated[:, 1].any())
    if suite == "craftax":
        assert terminated[:, 0].tolist() == [True, False, False]
        assert truncated[:, 0].tolist() == [False, False, True]


def test_navix_goal_terminates_with_exact_reward():
    pytest.importorskip("navix")
    env, params = envs.make("navix:Navix-Empty-5x5-v0")
    _, state = env.reset(jax.random.key(0), params)
    step = jax.jit(env.step)
    seen = []
    for action in (2, 2, 1, 2, 2):  # forward x2 (east), turn right (south), forward x2: goal
        _, state, reward, terminated, truncated, _ = step(jax.random.key(1), state, action, params)
        seen.append((float(reward), bool(terminated), bool(truncated)))
    assert seen == [(0.0, False, False)] * 4 + [(1.0, True, False)]
    assert int(state.t) == 0  # auto-reset


def test_xland_ids_are_refused_in_one_line():
    pytest.importorskip("xminigrid")
    with pytest.raises(ValueError, match=r"ruleset from a benchmark .*downloads"):
        envs.make("xminigrid:XLand-MiniGrid-R1-9x9")


def test_the_craftax_class_by_import_path_goes_through_the_legacy_adapter():
    pytest.importorskip("craftax")
    name = "craftax.craftax_classic.envs.craftax_symbolic_env:CraftaxClassicSymbolicEnv"
    env, params = envs.make(name)
    assert isinstance(env, LegacyStep)
    assert isinstance(env.action_space(params), spaces.Discrete)
    assert env.action_space(params).n == 17
    assert env.observation_space(params).shape == (1345,)


# ----------------------------------------------------------------- end to end


def test_train_by_name_then_evaluate_and_render_from_the_run_dir(tmp_path, capsys):
    """A suite env with constructor arguments (navix.make's max_steps) trains, and a fresh
    process finds it again from the run directory alone: evaluate plays it with the same
    arguments (episodes end by 20 steps); render says in one line that Navix has no renderer."""
    pytest.importorskip("navix")
    import jaxrl  # noqa: PLC0415

    run_dir = tmp_path / "navix"
    overrides = [
        "env.num_envs=2", "ppo.num_steps=8", "ppo.num_minibatches=1", "ppo.update_epochs=1",
        "network.hidden_sizes=[8]", "train.total_steps=32", "train.updates_per_chunk=1",
        "env.make_kwargs={max_steps: 20}",
    ]  # fmt: skip
    jaxrl.train("configs/navix_doorkey.yaml", overrides=overrides, run_dir=run_dir, quiet=True)
    done = subprocess.run(
        [sys.executable, "-m", "jaxrl.evaluate", "--run-dir", str(run_dir), "--episodes", "2",
         "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["episodes"] == 2 and result["mean_length"] <= 20
    from jaxrl.commands.render import main as render  # noqa: PLC0415 - the refusal, in process

    assert render(["--run-dir", str(run_dir), "--out", str(tmp_path / "navix.gif")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "renderer" in err, err


def test_craftax_renders_with_its_own_pixel_renderer():
    pytest.importorskip("craftax")
    env, params = envs.make("craftax:Craftax-Classic-Symbolic-v1")
    module = protocols.renderer(env)
    assert module is not None and module.__name__ == "jaxrl.envs.suites.craftax_render"
    keys = jax.random.split(jax.random.key(0), 2)
    states = jax.vmap(env.reset, (0, None))(keys, params)[1]  # two worlds, stacked as [T=2]
    frames = module.render_frames(states, params)
    assert len(frames) == 2 and frames[0].dtype == np.uint8 and frames[0].shape[2] == 3
    assert frames[0].shape[0] % 16 == 0 and frames[0].shape[1] % 16 == 0  # 16-pixel blocks
    assert not np.array_equal(frames[0], frames[1])  # two different worlds
