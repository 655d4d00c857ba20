"""The Python API: :func:`train`, :func:`evaluate`, :func:`load_policy` and :func:`export`,
as ``jaxrl.<name>``.

    import jaxrl

    result = jaxrl.train("configs/cartpole.yaml", overrides=["train.total_steps=20000"])
    result.history[-1]["rollout/episode_return"]          # trained in memory: no files
    jaxrl.evaluate(result, episodes=32).mean_return

    jaxrl.train(config, env=MyEnv, run_dir="runs/mine")    # as the CLI: config, events, checkpoints
    policy = jaxrl.load_policy("runs/mine")
    action = jax.jit(policy.act)(policy.params, obs, key)  # obs [B, *obs]: one row per agent
    jaxrl.export("runs/mine", "policy.onnx")               # one file, runs without jaxrl

The command lines (``python -m jaxrl.train``, ``jaxrl evaluate``, ...) are
:mod:`jaxrl.commands`. This module imports nothing heavy at
import time; each function imports what it needs. Errors name keyword arguments
(``overwrite=True``), not command-line flags.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jaxrl.config import Config
    from jaxrl.core.acting import PolicyParams
    from jaxrl.core.types import RunnerState
    from jaxrl.run.eval_result import EvalResult


@dataclasses.dataclass(frozen=True)
class TrainOutput:
    """What :func:`train` returns."""

    state: RunnerState  # the trained runner state (params, optimiser, env states, features)
    history: list[dict[str, Any]]  # one row per logged chunk: env_steps, update, metrics
    config: Config  # the run's config (env.name as resolved, overrides applied)
    run_dir: Path | None  # None: trained in memory, nothing written
    compile_s: float  # seconds to compile the chunk step
    sps: float  # env steps per second of one member after compile

    @property
    def policy(self) -> PolicyParams:
        """The trained policy (network params and observation normaliser)."""
        from jaxrl.core.acting import PolicyParams  # noqa: PLC0415

        return PolicyParams(params=self.state.params, obs_stats=self.state.obs_stats)


@dataclasses.dataclass(frozen=True)
class Policy:
    """A restored policy for deployment.

    ``act(params, obs, key) -> action`` is pure and jittable: ``obs`` is ``[B, *obs]`` raw
    observations (one row per agent slot of a multi-agent env), ``action`` ``[B, *action]``.
    A recurrent network acts with ``step(params, hidden, obs, is_first, key) -> (action,
    hidden)`` from ``initial_hidden(B)`` instead (``is_first`` [B] bool resets a row).
    """

    act: Callable[[Any, Any, Any], Any]
    step: Callable[[Any, Any, Any, Any, Any], tuple[Any, Any]]
    initial_hidden: Callable[[int], Any]
    params: PolicyParams  # pass as act's first argument
    checkpoint_step: int  # the update of the checkpoint restored
    config: Config
    recurrent: bool  # True: use step and initial_hidden; act refuses


# ----------------------------------------------------------------------------- train


def train(
    config: Config | str | Path | dict | None = None,
    *,
    env: Any = None,
    overrides: Sequence[str] = (),
    run_dir: str | Path | None = None,
    overwrite: bool = False,
    resume: bool = False,
    quiet: bool = False,
) -> TrainOutput:
    """Train a PPO agent.

    Args:
      config: a :class:`jaxrl.config.Config`, a YAML file, a nested dict, or None (defaults).
      env: the environment, overriding ``env.name``: a registered name or import path
        (``"my_pkg.envs:MyEnv"``), a class or factory (its import path is used when a fresh
        process can import it, so that the CLI finds the run's env again), or an env instance
        (registered in this process under its class name).
      overrides: ``"section.key=value"`` strings, as on the command line.
      run_dir: None trains in memory and writes nothing (no run directory, TensorBoard
        events or checkpoints); a directory trains as ``python -m jaxrl.train`` does.
      overwrite: replace a run already in ``run_dir``.
      resume: continue the run in ``run_dir`` from its latest checkpoint with its saved
        config, as ``python -m jaxrl.train --resume DIR`` does: ``overrides`` may change only
        the resumable keys (``train.total_steps=N`` trains further); ``config`` and ``env``
        must be left out.
      quiet: no summary or progress bar (the ``done:`` line is printed).

    Raises:
      jaxrl.config.ConfigError: a bad config value (one line naming the key).
      jaxrl.run.errors.TrainingError: a refused run directory, non-finite training, ...
    """
    from jaxrl.run import driver  # noqa: PLC0415
    from jaxrl.run.errors import RunDirError  # noqa: PLC0415
    from jaxrl.run.run_dir import resume_config  # noqa: PLC0415

    if resume:
        if run_dir is None or config is not None or env is not None:
            raise RunDirError(
                "resume=True needs run_dir= and takes no config or env (the run's saved "
                "config.yaml is used; overrides= may change the resumable keys)"
            )
        resumed = resume_config(Path(run_dir), list(overrides))
        result = driver.train(resumed, run_dir, resume=True, quiet=quiet)
        return _output(result, resumed or _saved_config(run_dir), run_dir)
    config = resolve_config(config, env, overrides)
    if run_dir is None:
        return _output(driver.train_in_memory(config, quiet=quiet), config, None)
    run_dir = Path(run_dir)
    if run_dir.exists() and any(run_dir.iterdir()) and not overwrite:
        raise RunDirError(
            f"run directory {run_dir} already holds a run; continue it with resume=True or "
            "replace it with overwrite=True"
        )
    result = driver.train(config, run_dir, overwrite=overwrite, quiet=quiet)
    return _output(result, config, run_dir)


def _saved_config(run_dir: str | Path) -> Config:
    """The config saved in a run directory."""
    from jaxrl.config import load_config  # noqa: PLC0415

    return load_config(Path(run_dir) / "config.yaml")


def _output(result: Any, config: Config, run_dir: str | Path | None) -> TrainOutput:
    """:class:`TrainOutput` of a :class:`jaxrl.run.driver.TrainResult`."""
    return TrainOutput(
        state=result.runner,
        history=result.history,
        config=config,
        run_dir=None if run_dir is None else Path(run_dir),
        compile_s=result.compile_s,
        sps=result.sps,
    )


def resolve_config(
    config: Config | str | Path | dict | None, env: Any = None, overrides: Sequence[str] = ()
) -> Config:
    """The validated :class:`Config` of :func:`train`'s arguments (``env`` registered first)."""
    from jaxrl.config import load_config  # noqa: PLC0415
    from jaxrl.config.loader import config_with_overrides  # noqa: PLC0415

    overrides = list(overrides)
    if env is not None:
        overrides.append(f"env.name={env_name(env)}")
    if config is None or isinstance(config, (str, Path)):
        return load_config(config, overrides)
    data = config if isinstance(config, dict) else config.to_dict()
    if env is not None:  # the new env's own source, not the config's
        data = {**data, "env": {k: v for k, v in data.get("env", {}).items() if k != "source"}}
    return config_with_overrides(data, overrides)


@dataclasses.dataclass(frozen=True)
class _Instance:
    """A factory returning one given env instance (equal for the same instance)."""

    env: Any

    def __call__(self) -> Any:
        return self.env


def env_name(env: Any) -> str:
    """The ``env.name`` that finds ``env``, registering it in this process when needed.

    A string is a name or an import path already. A class or factory that a fresh process can
    import is named by its import path (``"my_pkg.envs:MyEnv"``); one defined in ``__main__``
    or a notebook, and an env instance, are registered under their (class) name, replacing an
    earlier registration of that name.
    """
    from jaxrl import envs  # noqa: PLC0415
    from jaxrl.envs import protocols  # noqa: PLC0415

    if isinstance(env, str):
        return env
    if isinstance(env, protocols.Env) and not isinstance(env, type):
        name = type(env).__name__
        if envs.is_builtin(name):  # an instance of one of our envs, maybe not as registered
            name = f"{name}-instance"
        envs.register(name, _Instance(env), overwrite=True)
        return name
    if callable(env):
        return _factory_name(env)
    raise TypeError(
        f"env= takes a name, an import path, a class or factory, or an env instance; got "
        f"{type(env).__name__}"
    )


def _factory_name(factory: Callable[[], Any]) -> str:
    """The import path of a class or factory, else its name (registered in this process)."""
    import inspect  # noqa: PLC0415

    from jaxrl import envs  # noqa: PLC0415

    path = envs.import_path(factory)
    if path:
        return path
    named = inspect.isclass(factory) or inspect.isfunction(factory)
    name = factory.__name__ if named else type(factory).__name__
    name = f"{name}-factory" if envs.is_builtin(name) else name
    envs.register(name, factory, overwrite=True)
    return name


# ----------------------------------------------------------------------------- evaluate


def evaluate(
    run: TrainOutput | str | Path,
    episodes: int = 16,
    *,
    step: int | None = None,
    seed: int = 0,
    actions: str = "sample",
    stage: int | None = None,
    opponent: str | None = None,
    env_params: dict | None = None,
    team_size: int | None = None,
    env: Any = None,
) -> EvalResult | list[EvalResult]:
    """Play ``episodes`` episodes of a trained policy; the mean return and more.

    Args:
      run: what :func:`train` returned (also in memory), or a run directory.
      episodes: episodes to play (vmapped).
      step: a run directory's checkpoint update (default: the latest).
      seed: the evaluation seed.
      actions: ``"sample"`` draws actions from the policy, as PPO trained it (the default: a
        greedy policy can score far below its samples); ``"greedy"`` takes the mode of each
        action distribution (argmax, or the Gaussian's mean).
      stage: curriculum stage to play (default: the last).
      opponent: two-team envs: the scripted opponent (``"rule"``, ``"random"``, ``"idle"``).
      env_params: EnvParams overrides, a nested mapping (``{"reward": {"touch": 0.0}}``).
      team_size: two-team envs: players a side.
      env: the run's env for a run trained on an env registered from Python (an instance,
        class or factory; registered under the run's ``env.name``).

    Returns:
      An :class:`jaxrl.run.eval_result.EvalResult`, or one per member for a run of several
      members.
    """
    from jaxrl.commands.evaluate import evaluate as evaluate_dir  # noqa: PLC0415
    from jaxrl.commands.evaluate import evaluate_policy  # noqa: PLC0415
    from jaxrl.run.setup import make_setup  # noqa: PLC0415

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if isinstance(run, TrainOutput):
        if step is not None:
            raise ValueError("step= picks a checkpoint of a run directory; this run is in memory")
        update = _latest_update(run.state)
        if run.config.env.backend != "jax":  # a host run trained in memory: its host envs
            return _evaluate_host(run, update, episodes, seed, actions, stage, opponent,
                                  env_params, team_size)  # fmt: skip
        setup = make_setup(run.config)
        return evaluate_policy(
            setup, run.policy, update, episodes, seed, actions, stage, opponent,
            env_params, team_size,
        )  # fmt: skip
    register_run_env(run, env)
    return evaluate_dir(run, episodes, step, seed, actions, stage, opponent, env_params, team_size)


def _evaluate_host(run: TrainOutput, update: int, episodes: int, seed: int, actions: str,
                   *options: Any) -> EvalResult:  # fmt: skip
    """:func:`evaluate` of a host run in memory (``options``: stage, opponent, env_params,
    team_size, each refused)."""
    from jaxrl.commands.evaluate import refuse_host_options  # noqa: PLC0415
    from jaxrl.hostenv.learner import host_spec  # noqa: PLC0415
    from jaxrl.hostenv.play import evaluate_policy_host  # noqa: PLC0415
    from jaxrl.run.play import greedy  # noqa: PLC0415

    deterministic = greedy(actions)
    refuse_host_options(run.config.env.backend, *options)
    spec = host_spec(run.config)
    return evaluate_policy_host(spec, run.policy, update, episodes, seed, deterministic)


def _latest_update(state: RunnerState) -> int:
    """The update a runner state has reached (the furthest member's)."""
    import jax  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    return int(np.max(jax.device_get(state.update_step)))


def register_run_env(run_dir: str | Path, env: Any) -> None:
    """Register ``env`` under the ``env.name`` of the run in ``run_dir`` (no-op for None)."""
    if env is None:
        return
    import yaml  # noqa: PLC0415

    from jaxrl import envs  # noqa: PLC0415
    from jaxrl.envs import protocols  # noqa: PLC0415

    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        return  # the caller reports the missing run
    name = ((yaml.safe_load(path.read_text()) or {}).get("env") or {}).get("name", "")
    if isinstance(env, str) or not name or ":" in name or envs.is_builtin(name):
        return
    instance = isinstance(env, protocols.Env) and not isinstance(env, type)
    envs.register(name, _Instance(env) if instance else env, overwrite=True)


# ----------------------------------------------------------------------------- load_policy


def load_policy(
    run_dir: str | Path,
    *,
    step: int | None = None,
    member: int = 0,
    deterministic: bool = True,
    env: Any = None,
) -> Policy:
    """A run's policy for deployment: a jittable ``act(params, obs, key)`` and its params.

    A host-backend run (``env.backend: gymnasium | envpool``) gives its own network (one
    member; Box actions unclipped: clip them to the env's action space).

    Args:
      run_dir: a run directory.
      step: the checkpoint's update (default: the latest).
      member: runs of several members (seeds, sweep points): which one.
      deterministic: act with the mode of the action distribution (False: sample with
        ``key``, as :func:`evaluate` does by default).
      env: the run's env if it was registered from Python (see :func:`evaluate`).
    """
    from jaxrl.run.play import host_backend  # noqa: PLC0415
    from jaxrl.run.play import load_policy as restore  # noqa: PLC0415

    if host_backend(run_dir) is not None:  # gymnasium / EnvPool: the host run's own network
        if member != 0:
            raise ValueError(f"member= must be 0: a host run has one member, got {member}")
        return _host_policy(run_dir, step, deterministic)
    register_run_env(run_dir, env)
    setup, params, checkpoint_step = restore(run_dir, step)
    count = setup.members.count
    if count > 1:
        if not 0 <= member < count:
            raise ValueError(f"member= must be in 0..{count - 1}, got {member}")
        params = _member(params, member)
    elif member != 0:
        raise ValueError(f"member= must be 0: this run has one member, got {member}")
    recurrent = setup.config.network.core != "none"
    spec = setup.policy
    return Policy(
        act=functools.partial(_act, spec, deterministic, recurrent),
        step=functools.partial(_step, spec, deterministic),
        initial_hidden=setup.network.initial_hidden,
        params=params,
        checkpoint_step=checkpoint_step,
        config=setup.config,
        recurrent=recurrent,
    )


def _host_policy(run_dir: str | Path, step: int | None, deterministic: bool) -> Policy:
    """:func:`load_policy` of a host run (``env.backend: gymnasium | envpool``): its network
    acts on the env's raw observations; Box actions come unclipped (clip them to the env's
    action space, as jaxrl's host actor does)."""
    from jaxrl.hostenv.play import restore_host_policy  # noqa: PLC0415

    spec, params, checkpoint_step = restore_host_policy(run_dir, step)
    recurrent = spec.config.network.core != "none"
    return Policy(
        act=functools.partial(_act, spec.policy, deterministic, recurrent),
        step=functools.partial(_step, spec.policy, deterministic),
        initial_hidden=spec.network.initial_hidden,
        params=params,
        checkpoint_step=checkpoint_step,
        config=spec.config,
        recurrent=recurrent,
    )


def _member(params: Any, index: int) -> Any:
    import jax  # noqa: PLC0415

    return jax.tree.map(lambda x: x[index], params)


def _act(spec: Any, deterministic: bool, recurrent: bool, params: Any, obs: Any, key: Any) -> Any:
    """Actions ``[B, *action]`` for raw observations ``obs [B, *obs]`` (feed-forward)."""
    import jax.numpy as jnp  # noqa: PLC0415

    from jaxrl.core.acting import act  # noqa: PLC0415

    if recurrent:
        raise ValueError(
            "this policy is recurrent: act with policy.step(params, hidden, obs, is_first, key) "
            "from policy.initial_hidden(batch)"
        )
    rows = obs.shape[0]
    is_first = jnp.ones((rows,), bool)
    return act(spec, params, (), obs, is_first, key, deterministic).action


def _step(
    spec: Any, deterministic: bool, params: Any, hidden: Any, obs: Any, is_first: Any, key: Any
) -> tuple[Any, Any]:
    """``(action [B, *action], hidden)`` for one step of a recurrent (or any) policy."""
    from jaxrl.core.acting import act  # noqa: PLC0415

    out = act(spec, params, hidden, obs, is_first, key, deterministic)
    return out.action, out.hidden


# ----------------------------------------------------------------------------- export


def export(
    run: TrainOutput | str | Path,
    out: str | Path,
    format: str = "onnx",  # noqa: A002 - the command's --format
    **kwargs: Any,
) -> Any:
    """Write a run's policy as one ONNX or StableHLO file that runs without jaxrl.

    The file is written only if it matches jaxrl's actions on observations played in the
    run's env (see :mod:`jaxrl.commands.export`). ``kwargs``: ``step``, ``member``, ``sample``,
    ``check_steps``, ``check_envs``, ``seed``, ``atol``, as :func:`jaxrl.commands.export.export`
    takes.

    Args:
      run: a run directory, or what :func:`train` returned with a ``run_dir``.
      out: the file to write.
      format: ``"onnx"`` (onnxruntime, no JAX; ``pip install 'jaxrl[onnx]'``) or
        ``"stablehlo"`` (``jax.export.deserialize``).

    Returns:
      A :class:`jaxrl.commands.export.ExportResult` (path, size, inputs and outputs, the check).
    """

    if isinstance(run, TrainOutput):
        if run.run_dir is None:
            raise ValueError("export needs a run directory: train with run_dir= to export")
        run = run.run_dir
    from jaxrl.commands.export import export as export_file  # noqa: PLC0415

    return export_file(run, out, format, **kwargs)
