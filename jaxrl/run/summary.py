"""What a run says about itself: the summary printed before training, and the status of its
features (curriculum stage, self-play) shown on the progress bar and the ``done:`` line.

Host-side only: everything here reads the config, the built setup or a chunk's metrics,
already on the host.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import jax
from tqdm import tqdm

from jaxrl.config import Config
from jaxrl.core.networks import ActorCritic
from jaxrl.run.setup import Setup
from jaxrl.run.signals import stop_hint


@runtime_checkable
class ReportsStatus(Protocol):
    """A train-step feature that says in a few words where it stands after a chunk.

    ``metrics`` are the chunk's scalars of one member (``{tag: float}``, NaN for a metric no
    update of the chunk produced); the feature reads the tags it declared itself.
    """

    name: str

    def status(self, metrics: Mapping[str, float]) -> str:
        """E.g. ``stage 2/3 (league)``; ``""`` when there is nothing to say."""
        ...


def feature_status(setup: Setup, rows: Sequence[Mapping[str, float]]) -> str:
    """The features' statuses after a chunk, joined: ``stage 2/3 (league), self-play on``.

    ``rows``: the chunk's scalars per member. Members that differ are shown one by one.
    """
    reporters = [f for f in setup.features if isinstance(f, ReportsStatus)]
    if not reporters or not rows:
        return ""
    per_member = [", ".join(s for f in reporters if (s := f.status(row))) for row in rows]
    if len(set(per_member)) == 1:
        return per_member[0]
    return "members: " + " | ".join(per_member)


def _devices_line(env_count: int, shards: int) -> str:
    devices = ", ".join(f"{d.platform}:{d.id}" for d in jax.devices()[:8]) + (
        ", ..." if jax.device_count() > 8 else ""
    )
    if jax.process_count() > 1:
        devices += f" ({jax.device_count()} devices of {jax.process_count()} processes)"
    return devices + (
        f"; env batch sharded over {shards} ({env_count // shards} envs each), params replicated"
        if shards > 1
        else "; one device trains"
    )


def batch_line(config: Config, setup: Setup) -> str:
    """``1024 = 16 envs x 64 steps (24 agents per env: 24,576 agent steps per update); ...``.

    The agents are those the learner drives in one env (a two-team env: its team's).
    """
    ppo, env, layout = config.ppo, config.env, setup.layout
    agents = layout.actors_per_env
    count = f"{agents} of {layout.num_agents}" if layout.two_team else f"{agents}"
    team = " on the learner's team" if layout.two_team else ""
    per_env = (
        f" ({count} agents per env{team}: {config.batch_size * agents:,} agent steps per update)"
        if agents > 1
        else ""
    )
    return (
        f"{config.batch_size} = {env.num_envs} envs x {ppo.num_steps} steps{per_env}; "
        f"{ppo.num_minibatches} minibatches of {config.minibatch_size} x {ppo.update_epochs} "
        "epochs"
    )


def schedule_line(config: Config, start_update: int) -> str:
    """Updates, env steps and chunks; says so when ``train.total_steps`` is not whole updates."""
    trained = config.num_updates * config.batch_size
    line = f"{config.num_updates} updates ({trained:,} env steps)"
    if trained != config.train.total_steps:
        line += (
            f": train.total_steps={config.train.total_steps} rounds to {trained:,} "
            f"({config.num_updates:,} updates of {config.batch_size:,})"
        )
    return line + f" in chunks of {config.chunk_updates}; starting at update {start_update}"


def _network_line(config: Config, network: Any) -> str:
    net = config.network
    core = f", {net.core.upper()} {net.core_size}" if net.core != "none" else ""
    torsos = "shared" if net.shared_torso else "separate"
    encoders = network.encoders if isinstance(network, ActorCritic) else None
    images = [leaf for leaf in encoders or () if leaf.kind != "flat"]
    cnn = "".join(
        f"{leaf.kind} CNN on {leaf.name} {'x'.join(map(str, leaf.shape))}, " for leaf in images
    )
    return f"{cnn}MLP {list(net.hidden_sizes)} {net.activation}, {torsos} torsos{core}"


def _features_line(config: Config) -> str:
    ppo, env = config.ppo, config.env
    on = lambda flag: "on" if flag else "off"  # noqa: E731
    return (
        f"obs norm {on(env.normalize_obs)}, lr anneal {on(ppo.anneal_lr)}, "
        f"value clip {on(ppo.clip_value)}, adv norm {on(ppo.normalize_advantages)}, "
        f"reward scale {ppo.reward_scale:g}"
    )


def _base_lines(config: Config, setup: Setup, run_dir: Path, start_update: int) -> list[str]:
    env = config.env
    every = config.checkpoint.every_updates
    saves = f"every {every} updates and at the end" if every else "at the end only"
    many = setup.members.count > 1
    return [
        f"jaxrl on jax {jax.__version__}",
        f"  run dir      {run_dir}",
        f"  devices      {_devices_line(env.num_envs, setup.layout.devices)}",
        f"  precision    {config.precision} -> compute {setup.compute_dtype.name}, params float32",
        f"  env          {env.name} x {env.num_envs} envs, action repeat {env.action_repeat}, "
        f"{'discrete' if setup.discrete else 'continuous'} actions, obs {setup.obs_shape}",
        f"  batch        {batch_line(config, setup)}",
        f"  schedule     {schedule_line(config, start_update)}",
        f"  network      {_network_line(config, setup.network)}",
        f"  features     {_features_line(config)}",
        f"  checkpoints  {saves}, keep the last {config.checkpoint.keep}; {stop_hint()}",
        f"  speed        env steps/s{' of one member (as perf/sps)' if many else ''} over each "
        "chunk, after compile",
    ]


def _members_lines(config: Config, setup: Setup) -> list[str]:
    members = setup.members
    if members.count == 1:
        return []
    swept = ", ".join(f"{k} {v}" for k, v in config.sweep.items())
    return [
        f"  members      {members.count} runs vmapped in one program: "
        f"{members.count // config.train.num_seeds} sweep points x "
        f"{config.train.num_seeds} seeds ({members.seeds[0]}..{max(members.seeds)})"
        + (f"; sweep {swept}" if swept else "")
        + "; TensorBoard runs "
        + ", ".join(members.names[:4])
        + (", ..." if members.count > 4 else "")
    ]


def _parts_lines(setup: Setup, features: dict) -> list[str]:
    """The population features' lines (PBT, the league), the teams, then each feature's and
    learner feature's (exploiters') own lines."""

    def own(parts: Sequence) -> list[str]:
        return [f"  {line}" for part in parts for line in part.summary(features.get(part.name))]

    lines = own(setup.population_features)
    layout = setup.layout
    if layout.two_team:
        lines.append(
            f"  teams        two teams of {layout.team_size}: the learner drives one per env, "
            f"{layout.num_envs * layout.actors_per_env} training actors"
        )
    return lines + own(setup.features) + own(setup.learner_features)


def run_summary(
    config: Config, setup: Setup, run_dir: Path, start_update: int, features: dict
) -> str:
    """A few lines describing the run, printed before training."""
    lines = _base_lines(config, setup, run_dir, start_update)
    lines += _members_lines(config, setup)
    lines += _parts_lines(setup, features)
    return "\n".join(lines)


def done_line(
    env_steps: int,
    members: int,
    sps: float,
    compile_s: float,
    final: float,
    status: str,
    run_dir: Path | None,
) -> str:
    """The line a finished run prints: steps, speed, last return, feature status, run dir
    (``None``: an in-memory run, :func:`jaxrl.commands.train` with ``run_dir=None``)."""
    per_member = " per member" if members > 1 else ""
    return (
        f"done: {env_steps:,} env steps"
        + (f" x {members} members" if members > 1 else "")
        + f", {sps:,.0f} env steps/s{per_member} after {compile_s:.1f} s compile, "
        f"last episode return {final:.4g}"
        + (f", {status}" if status else "")
        + (f"; run dir {run_dir}" if run_dir is not None else "; in memory, nothing written")
    )


def nan_mean(value: float | list[float]) -> float:
    """One number from a history value (a list of members' values: their mean of non-NaNs)."""
    if isinstance(value, list):
        finite = [v for v in value if not math.isnan(v)]
        return sum(finite) / len(finite) if finite else math.nan
    return value


def progress_bar(config: Config, update: int, quiet: bool) -> tqdm:
    """The run's progress bar over env steps, from ``update`` to the run's last update."""
    batch = config.batch_size
    return tqdm(
        total=config.num_updates * batch,
        initial=update * batch,
        unit="step",
        unit_scale=True,
        dynamic_ncols=True,
        # One speed: perf/sps of a member over the last chunk (tqdm's own rate left out).
        bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} env steps [{elapsed}<{remaining}{postfix}]",
        disable=quiet or not config.train.progress_bar,
    )
