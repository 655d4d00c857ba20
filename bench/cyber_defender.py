"""A trained CAGE2 defender against the CAGE-2 challenge's final leaderboard.

    python -m bench.cyber_defender --run-dir DIR [--episodes 1000] [--seed 153] [--step S]
                                   [--stochastic] [--json FILE]
    python -m bench.cyber_defender --run-dir DIR,DIR[,...] [...]
    python -m bench.cyber_defender --b-line-run DIR[,...] --meander-run DIR[,...] [...]
    python -m bench.cyber_defender ... --opening 51,116   # Blue's first actions scripted

Plays the run's policy (deterministic: the mode of each action distribution) in the twelve
cells of the challenge's evaluation: Red B_line and Meander, 30, 50 and 100 steps, with CybORG
2.1's bugs (``fix_bugs=False``, the leaderboard's setting) and with CybORG++'s fixes. Each cell
is ``--episodes`` vmapped episodes of one compiled program (the cell's env params are its
arguments), all cells from the same evaluation key (``--seed``, 153 by default after the
challenge's ``random.seed(153)``-style fixed evaluation seeds), GreenAgent off as in the
official evaluation. Prints mean +- standard error per cell beside the leaderboard's top
entries and the best entry per cell, and says whether the defender is at or above the best
entry in every 2.1 cell and its six-cell total at or above :data:`TARGET_TOTAL` (issue 20's
targets). The leaderboard has no fixed-bugs column: those scores are reported, not compared.

A run with several members (``train.num_seeds``, sweeps) is evaluated member by member in the
same program (vmapped).

Several runs in one ``--run-dir`` (commas) play as one *ensemble* defender, as the
leaderboard's second entry did (its ensembles, not its single PPO, made its B_line 100 score):
each network keeps its own recurrent state and sees every observation, and Blue's action
distribution is the mean of their action probabilities (:class:`Ensemble`; deterministic play
takes its mode). The runs must each have one member and see the same observation.

``--b-line-run`` and ``--meander-run`` play one defender per Red instead, as the leaderboard's
first two entries did: both networks see every observation (each with its own recurrent
state), and :func:`jaxrl.envs.cyber.fingerprint.update_verdict` picks whose action Blue takes: the
B_line run's until the observation of step 3 tells the Reds apart, then the run of the Red it
names, for the rest of the episode (:class:`RedGated`). Each run is typically trained on its
own Red (``env.kwargs.red_agent=1`` or ``2``). Either side may itself be an ensemble (commas).

``--opening A,B,...`` scripts Blue's first actions of every episode (CybORG's action indices;
CardiffUni opened with ``51,116,55``: Femitter and Tomcat decoys on User2, Haraka on
Enterprise0), then the defender plays on (:class:`Opening`); the defender sees every
observation from the first, so its recurrent state is the one it would have had.

Exits 0 once every cell is played, whatever the verdict; 1 with one line on bad input (not a
run directory, not a CAGE2 run, a bad step or episode count, an unusable pair of runs).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.commands.evaluate import run_episodes
from jaxrl.config import ConfigError, load_run_config
from jaxrl.core.acting import PolicyParams
from jaxrl.envs.cyber import fingerprint
from jaxrl.envs.cyber import red as cyber_red
from jaxrl.envs.cyber import tables as cyber_tables
from jaxrl.run.checkpoint import CheckpointError
from jaxrl.run.play import load_policy, play_params
from jaxrl.run.setup import Setup

LENGTHS = (30, 50, 100)  # the challenge's episode lengths
# The active Reds' agent indices (as bench.research.cyber_fidelity.RED_INDEX names them).
REDS = {"B_line": cyber_red.BLINE_AGENT, "Meander": cyber_red.MEANDER_AGENT}
BUGS = {"2.1": False, "fixed": True}  # fix_bugs per column group: CybORG 2.1, CybORG++
CELLS_PER_SETTING = len(REDS) * len(LENGTHS)  # six cells a bug setting

# The CAGE-2 challenge's final leaderboard (CybORG 2.1, 1000 episodes a cell): the top three
# entries' six-cell totals and, where published per cell, their scores at 30/50/100 steps.
LEADERBOARD: dict[str, dict] = {
    "CardiffUni": {
        "B_line": (-3.47, -6.41, -13.76),
        "Meander": (-5.64, -8.69, -16.6),
        "total": -54.57,
    },
    "Keeping it RL": {
        "B_line": (-3.48, -5.85, -11.39),
        "Meander": (-6.47, -10.33, -19.38),
        "total": -56.9,
    },
    "Mindrake": {"total": -57.05},
}
TARGET_TOTAL = -50.0  # issue 20: the six 2.1 cells together


def best_entry(red: str, length: int) -> float:
    """The best leaderboard score of one 2.1 cell (over the entries with per-cell scores)."""
    i = LENGTHS.index(length)
    return max(entry[red][i] for entry in LEADERBOARD.values() if red in entry)


@dataclasses.dataclass(frozen=True)
class Cell:
    """One evaluation cell's score: the mean return of ``episodes`` episodes and its SE."""

    bugs: str  # "2.1" | "fixed"
    red: str  # "B_line" | "Meander"
    length: int  # steps per episode
    mean: float
    se: float  # standard error of the mean (std / sqrt(episodes))


@dataclasses.dataclass(frozen=True)
class DefenderScores:
    """One policy's twelve cells (one member of the run)."""

    step: int  # checkpoint update step
    episodes: int  # per cell
    seed: int  # evaluation seed
    deterministic: bool
    cells: tuple[Cell, ...]  # bugs x red x length, in BUGS, REDS, LENGTHS order
    member: str | None = None  # the member's name in a run with several members
    # several runs played as one defender (an ensemble, a per-Red pair): their dirs and updates,
    # e.g. "B_line: DIR (update S), Meander: DIR (update S)"
    runs: str | None = None
    opening: tuple[int, ...] = ()  # Blue's scripted first actions (--opening), if any

    def cell(self, bugs: str, red: str, length: int) -> Cell:
        """The cell of one bug setting, Red agent and episode length."""
        return next(c for c in self.cells if (c.bugs, c.red, c.length) == (bugs, red, length))

    def total(self, bugs: str) -> float:
        """The six cells of one bug setting, summed (the leaderboard's total)."""
        return sum(c.mean for c in self.cells if c.bugs == bugs)

    def cells_at_best(self) -> int:
        """How many of the six 2.1 cells are at or above the best leaderboard entry."""
        return sum(
            self.cell("2.1", red, n).mean >= best_entry(red, n) for red in REDS for n in LENGTHS
        )

    def meets_targets(self) -> bool:
        """Issue 20's targets: every 2.1 cell at or above the best entry, total >= -50."""
        return self.cells_at_best() == CELLS_PER_SETTING and self.total("2.1") >= TARGET_TOTAL

    def to_json(self) -> dict:
        """JSON-ready dict, with the verdict."""
        data = dataclasses.asdict(self)
        data["total"] = {bugs: self.total(bugs) for bugs in BUGS}
        data["cells_at_best_entry"] = self.cells_at_best()
        data["meets_targets"] = self.meets_targets()
        return data


class GatedHidden(struct.PyTreeNode):
    """The recurrent state of :class:`RedGated` for ``N`` env rows."""

    b_line: Any  # the B_line defender's carry
    meander: Any  # the Meander defender's carry
    verdict: jax.Array  # [N] int32, fingerprint.UNDECIDED or the Red index named


class RedGated(nn.Module):
    """One defender per Red behind the fingerprint, as one network for the shared match step.

    ``__call__(hidden, obs [1, N, 79], is_first [1, N])`` runs both defenders on the step's
    observations and returns the Meander defender's logits and value where the verdict names
    Meander, else the B_line defender's (also before the verdict). Params:
    ``{"params": {"b_line": ..., "meander": ...}}``. Play only: one step at a time.
    """

    b_line: nn.Module  # jaxrl.core.networks.ActorCritic of the B_line run
    meander: nn.Module  # and of the Meander run

    def __call__(self, hidden: GatedHidden, obs: jax.Array, is_first: jax.Array):
        if obs.shape[0] != 1:
            raise ValueError(f"RedGated plays one step at a time, got {obs.shape[0]}")
        b_hidden, b_logits, b_value = self.b_line(hidden.b_line, obs, is_first)
        m_hidden, m_logits, m_value = self.meander(hidden.meander, obs, is_first)
        verdict = fingerprint.update_verdict(hidden.verdict, obs[0], is_first[0])
        meander = (verdict == cyber_red.MEANDER_AGENT)[None]  # [1, N]
        logits = jnp.where(meander[..., None], m_logits, b_logits)
        value = jnp.where(meander, m_value, b_value)
        return GatedHidden(b_line=b_hidden, meander=m_hidden, verdict=verdict), logits, value

    def initial_hidden(self, batch: int) -> GatedHidden:
        """Fresh carries of both defenders, no verdict."""
        return GatedHidden(
            b_line=self.b_line.initial_hidden(batch),
            meander=self.meander.initial_hidden(batch),
            verdict=jnp.full((batch,), fingerprint.UNDECIDED, jnp.int32),
        )


class EnsembleHidden(struct.PyTreeNode):
    """The recurrent state of an :class:`Ensemble`: each network's own carry."""

    members: tuple  # per network, in the ensemble's order, its carry for N env rows


class Ensemble(nn.Module):
    """Several defenders as one network: the mean of their action probabilities.

    ``__call__(hidden, obs [L, N, D], is_first [L, N])`` runs every network on the same
    observations, each with its own carry, and returns ``log(mean_k softmax(logits_k))``
    ``[L, N, A]`` float32 as the logits (their mode is the most probable action of the mixture,
    and sampling them samples it) and the mean value ``[L, N]`` float32. Params:
    ``{"params": {"members_0": ..., "members_1": ..., ...}}``.
    """

    members: tuple[nn.Module, ...]  # jaxrl.core.networks.ActorCritic of each run (discrete)

    def __call__(self, hidden: EnsembleHidden, obs: jax.Array, is_first: jax.Array):
        outputs = [
            network(carry, obs, is_first)
            for network, carry in zip(self.members, hidden.members, strict=True)
        ]
        log_probs = jnp.stack(
            [jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1) for _, logits, _ in outputs]
        )  # [K, L, N, A]
        logits = jax.nn.logsumexp(log_probs, axis=0) - jnp.log(float(len(outputs)))
        value = jnp.mean(jnp.stack([v.astype(jnp.float32) for _, _, v in outputs]), axis=0)
        return EnsembleHidden(members=tuple(carry for carry, _, _ in outputs)), logits, value

    def initial_hidden(self, batch: int) -> EnsembleHidden:
        """Every network's fresh carry."""
        return EnsembleHidden(members=tuple(net.initial_hidden(batch) for net in self.members))


class OpeningHidden(struct.PyTreeNode):
    """The recurrent state of :class:`Opening` for ``N`` env rows."""

    inner: Any  # the defender's own carry
    step: jax.Array  # [N] int32, steps played in the episode so far


class Opening(nn.Module):
    """A defender whose first ``len(actions)`` actions of every episode are scripted.

    ``__call__(hidden, obs [1, N, D], is_first [1, N])`` runs the defender (so its carry moves
    as in its own play) and, while the episode's step is below ``len(actions)``, returns
    logits ``[1, N, A]`` float32 that put all the probability on that step's scripted action
    (log-probabilities 0 and -1e9: its mode, and every sample); afterwards the defender's own.
    Params: ``{"params": {"network": ...}}``. Play only: one step at a time.
    """

    network: nn.Module  # the defender (a run's network, an Ensemble, a RedGated pair)
    actions: tuple[int, ...]  # CybORG Blue action indices, in [0, 145)

    def __call__(self, hidden: OpeningHidden, obs: jax.Array, is_first: jax.Array):
        if obs.shape[0] != 1:
            raise ValueError(f"Opening plays one step at a time, got {obs.shape[0]}")
        inner, logits, value = self.network(hidden.inner, obs, is_first)
        step = jnp.where(is_first[0], 0, hidden.step)  # [N]
        scripted = jnp.asarray(self.actions, jnp.int32)[jnp.minimum(step, len(self.actions) - 1)]
        forced = jnp.where(
            jax.nn.one_hot(scripted, logits.shape[-1], dtype=jnp.bool_), 0.0, -1e9
        )  # [N, A]
        logits = jnp.where(
            (step < len(self.actions))[None, :, None], forced[None], logits.astype(jnp.float32)
        )
        return OpeningHidden(inner=inner, step=step + 1), logits, value

    def initial_hidden(self, batch: int) -> OpeningHidden:
        """The defender's fresh carry, no step played."""
        return OpeningHidden(
            inner=self.network.initial_hidden(batch), step=jnp.zeros((batch,), jnp.int32)
        )


def with_opening(
    setup: Setup, policy: PolicyParams, actions: Sequence[int]
) -> tuple[Setup, PolicyParams]:
    """``setup`` and ``policy`` with Blue's first ``actions`` scripted (:class:`Opening`).

    Raises:
      ValueError: no action, or one outside the run's action space (``[0, 145)``, or
      ``[0, 36)`` with ``env.kwargs.action_set=reduced``).
    """
    num_actions = int(setup.env.action_space(setup.env_params).n)
    opening = Opening(network=setup.network, actions=_checked_opening(actions, num_actions))
    params = {"params": {"network": policy.params["params"]}}
    return _with_network(setup, opening), PolicyParams(params=params, obs_stats=policy.obs_stats)


def parse_opening(text: str) -> tuple[int, ...]:
    """``--opening``'s comma-separated action indices (ValueError naming the option)."""
    try:
        actions = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--opening takes action indices like 51,116, got {text!r}") from None
    return _checked_opening(actions)


def _checked_opening(
    actions: Sequence[int], num_actions: int = cyber_tables.NUM_ACTIONS
) -> tuple[int, ...]:
    """An opening's actions as ints, at least one, each in ``[0, num_actions)`` (ValueError)."""
    actions = tuple(int(a) for a in actions)
    if not actions or not all(0 <= a < num_actions for a in actions):
        raise ValueError(f"--opening needs actions in [0, {num_actions}), got {list(actions)}")
    return actions


def _with_network(setup: Setup, network: nn.Module) -> Setup:
    """``setup`` playing ``network`` (a combined or wrapped defender) instead of its own."""
    return dataclasses.replace(
        setup, network=network, policy=dataclasses.replace(setup.policy, network=network)
    )


def _check_cage2_run(run_dir: str | Path) -> None:
    """Refuse a run of another env before restoring it (ValueError)."""
    if (Path(run_dir) / "config.yaml").is_file():
        env_name = load_run_config(run_dir).env.name
        if env_name != "CAGE2":
            raise ValueError(f"{run_dir} trained {env_name}, not CAGE2")


def as_runs(runs: str | Path | Sequence[str | Path]) -> list[Path]:
    """One run, several, or a comma-separated list of them, as paths."""
    if isinstance(runs, (str, Path)):
        runs = str(runs).split(",")
    paths = [Path(run) for run in runs if str(run)]
    if not paths:
        raise ValueError("no run directory given")
    return paths


def load_defender(
    runs: str | Path | Sequence[str | Path], fingerprint_obs: bool = False
) -> tuple[Setup, PolicyParams, int, str]:
    """One run's latest policy, or several runs' as one :class:`Ensemble`.

    Returns ``(setup, policy, step, label)``: the first run's setup with the (ensemble)
    network, the params (an ensemble's under ``members_<k>``), the first run's step, and a
    label naming each run and its step.

    Raises:
      CheckpointError: a run is not a run directory, or has no checkpoint.
      ValueError: a run is not a CAGE2 run, has several members, normalises observations, sees
        another observation than the first, or (``fingerprint_obs``) does not see the
        extended observation the Red fingerprint reads.
    """
    paths = as_runs(runs)
    loaded = []  # (setup, policy, step) per run
    for run_dir in paths:
        _check_cage2_run(run_dir)
        setup, policy, step = load_policy(run_dir)
        if setup.members.count != 1:
            raise ValueError(f"{run_dir} has {setup.members.count} members; give single runs")
        if setup.normalize_obs and (len(paths) > 1 or fingerprint_obs):
            raise ValueError(f"{run_dir} normalises observations; combined runs need raw ones")
        mode = setup.env_params.obs_mode
        if fingerprint_obs and mode not in ("extended", "history"):
            raise ValueError(f"{run_dir} sees obs_mode={mode!r}, not extended or history")
        if loaded:
            first = loaded[0][0]
            if (mode, setup.obs_shape) != (first.env_params.obs_mode, first.obs_shape):
                raise ValueError(
                    f"{run_dir} sees obs_mode={mode!r} {setup.obs_shape}, the first run "
                    f"{first.env_params.obs_mode!r} {first.obs_shape}"
                )
        loaded.append((setup, policy, step))
    label = ", ".join(
        f"{run} (update {step})" for run, (_, _, step) in zip(paths, loaded, strict=True)
    )
    setup, policy, step = loaded[0]
    if len(loaded) == 1:
        return setup, policy, step, label
    setup = _with_network(setup, Ensemble(members=tuple(s.network for s, _, _ in loaded)))
    params = {f"members_{k}": p.params["params"] for k, (_, p, _) in enumerate(loaded)}
    return setup, PolicyParams(params={"params": params}, obs_stats=policy.obs_stats), step, label


def load_pair(
    b_line_runs: str | Path | Sequence[str | Path],
    meander_runs: str | Path | Sequence[str | Path],
) -> tuple[Setup, PolicyParams, int, str]:
    """Two defenders (each one run or an ensemble, :func:`load_defender`) as one
    :class:`RedGated` defender.

    Returns ``(setup, policy, step, label)``: the B_line side's setup with the gated network,
    the two sides' params under ``b_line`` and ``meander``, the B_line side's step, and a
    label naming both sides' runs and steps.

    Raises:
      CheckpointError, ValueError: as :func:`load_defender` (the extended observation
        required), or the two sides see different observations.
    """
    b_setup, b_policy, b_step, b_label = load_defender(b_line_runs, fingerprint_obs=True)
    m_setup, m_policy, _, m_label = load_defender(meander_runs, fingerprint_obs=True)
    if b_setup.obs_shape != m_setup.obs_shape:
        raise ValueError(f"the pair sees observations {b_setup.obs_shape} and {m_setup.obs_shape}")
    setup = _with_network(b_setup, RedGated(b_line=b_setup.network, meander=m_setup.network))
    policy = PolicyParams(
        params={"params": {"b_line": b_policy.params["params"],
                           "meander": m_policy.params["params"]}},
        obs_stats=b_policy.obs_stats,
    )  # fmt: skip
    return setup, policy, b_step, f"B_line: {b_label}; Meander: {m_label}"


def evaluate_defender(
    run_dir: str | Path,
    episodes: int = 1000,
    seed: int = 153,
    step: int | None = None,
    deterministic: bool = True,
    opening: Sequence[int] = (),
) -> list[DefenderScores]:
    """Play the run's policy in every cell; one :class:`DefenderScores` per member.

    Raises:
      CheckpointError: not a run directory, or no matching checkpoint.
      ValueError: not a CAGE2 run, or ``episodes < 1``.
    """
    if episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {episodes}")
    _check_cage2_run(run_dir)  # refuse another env before restoring
    setup, policy, step = load_policy(run_dir, step)
    if opening:
        if setup.members.count != 1:
            raise ValueError(f"--opening plays single runs; {run_dir} has several members")
        setup, policy = with_opening(setup, policy, opening)
    scores = play_cells(setup, policy, step, episodes, seed, deterministic)
    return [dataclasses.replace(s, opening=tuple(opening)) for s in scores]


def evaluate_ensemble(
    runs: str | Path | Sequence[str | Path],
    episodes: int = 1000,
    seed: int = 153,
    deterministic: bool = True,
    opening: Sequence[int] = (),
) -> DefenderScores:
    """Play several runs as one :class:`Ensemble` (:func:`load_defender`) in every cell.

    Raises:
      CheckpointError, ValueError: as :func:`load_defender`, or ``episodes < 1``.
    """
    return _play_combined(lambda: load_defender(runs), episodes, seed, deterministic, opening)


def evaluate_pair(
    b_line_runs: str | Path | Sequence[str | Path],
    meander_runs: str | Path | Sequence[str | Path],
    episodes: int = 1000,
    seed: int = 153,
    deterministic: bool = True,
    opening: Sequence[int] = (),
) -> DefenderScores:
    """Play a per-Red pair of defenders (:func:`load_pair`) in every cell.

    Raises:
      CheckpointError, ValueError: as :func:`load_pair`, or ``episodes < 1``.
    """
    load = lambda: load_pair(b_line_runs, meander_runs)  # noqa: E731
    return _play_combined(load, episodes, seed, deterministic, opening)


def _play_combined(
    load: Callable[[], tuple[Setup, PolicyParams, int, str]],
    episodes: int,
    seed: int,
    deterministic: bool,
    opening: Sequence[int],
) -> DefenderScores:
    """Every cell of a defender of several runs; ``load`` runs only once the episode count
    is known to be good (bad input is refused before any checkpoint is restored)."""
    if episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {episodes}")
    setup, policy, step, label = load()
    if opening:
        setup, policy = with_opening(setup, policy, opening)
    (scores,) = play_cells(setup, policy, step, episodes, seed, deterministic)
    return dataclasses.replace(scores, runs=label, opening=tuple(opening))


def play_cells(
    setup: Setup,
    policy: PolicyParams,
    step: int,
    episodes: int,
    seed: int,
    deterministic: bool,
) -> list[DefenderScores]:
    """Every cell of ``policy`` (a leading member axis when the run has several members)."""
    members = setup.members

    def play(policy, env_params):  # -> [E] float32 returns (one member)
        stats = run_episodes(
            setup, policy, jax.random.key(seed), episodes, deterministic, env_params
        )
        return stats.episode_return

    # One compile serves every cell: the cell's env params are array arguments.
    play = jax.jit(play if members.count == 1 else jax.vmap(play, in_axes=(0, None)))
    returns = {}  # (bugs, red, length) -> [R, E] float64
    for bugs, fix in BUGS.items():
        for red, red_agent in REDS.items():
            for length in LENGTHS:
                overrides = {"red_agent": red_agent, "max_steps_in_episode": length,
                             "fix_bugs": fix, "green_agent": False}  # fmt: skip
                env_params = play_params(setup, overrides=overrides)
                cell_returns = np.asarray(jax.device_get(play(policy, env_params)), np.float64)
                returns[bugs, red, length] = cell_returns.reshape(members.count, episodes)

    def scores(i: int) -> DefenderScores:
        cells = tuple(
            Cell(
                bugs=bugs,
                red=red,
                length=length,
                mean=float(r[i].mean()),
                se=float(r[i].std() / np.sqrt(episodes)),
            )
            for (bugs, red, length), r in returns.items()
        )
        return DefenderScores(
            step=int(step),
            episodes=episodes,
            seed=seed,
            deterministic=deterministic,
            cells=cells,
            member=members.names[i] if members.count > 1 else None,
        )

    return [scores(i) for i in range(members.count)]


def report(scores: DefenderScores) -> str:
    """The defender's table beside the leaderboard, and the verdict, as text."""

    def row(label: str, values: tuple[float, ...], total: float) -> str:
        return f"| {label} | " + " | ".join(f"{v:.2f}" for v in values) + f" | {total:.2f} |"

    lines = [
        (f"{scores.member}: " if scores.member else "")
        + (f"{scores.runs}; " if scores.runs else "")
        + (f"opening {','.join(map(str, scores.opening))}; " if scores.opening else "")
        + f"step {scores.step}, {scores.episodes} episodes a cell, seed {scores.seed}, "
        + ("deterministic" if scores.deterministic else "stochastic")
        + " actions",
        "",
        "| Blue | " + " | ".join(f"{red} {n}" for red in REDS for n in LENGTHS) + " | total |",
        "|---" * (1 + CELLS_PER_SETTING + 1) + "|",
    ]
    for bugs in BUGS:
        cells = [scores.cell(bugs, red, n) for red in REDS for n in LENGTHS]
        lines.append(
            f"| jaxrl ({bugs}) | "
            + " | ".join(f"{c.mean:.2f} +- {c.se:.2f}" for c in cells)
            + f" | {scores.total(bugs):.2f} |"
        )
    for name, entry in LEADERBOARD.items():
        if "B_line" in entry:
            lines.append(row(name, entry["B_line"] + entry["Meander"], entry["total"]))
        else:
            blanks = " | ".join("-" for _ in range(CELLS_PER_SETTING))
            lines.append(f"| {name} | {blanks} | {entry['total']:.2f} |")
    best = tuple(best_entry(red, n) for red in REDS for n in LENGTHS)
    lines.append(row("best entry per cell", best, sum(best)))
    met = scores.cells_at_best()
    lines += [
        "",
        f"2.1: {met}/{CELLS_PER_SETTING} cells at or above the best entry; "
        f"total {scores.total('2.1'):.2f} "
        f"(target >= {TARGET_TOTAL:.1f}): targets {'met' if scores.meets_targets() else 'not met'}",
    ]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    """The command line of ``python -m bench.cyber_defender``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.cyber_defender",
        description="A trained CAGE2 defender against the CAGE-2 leaderboard.",
    )
    parser.add_argument(
        "--run-dir", help="a CAGE2 run written by jaxrl train (DIR,DIR,...: an ensemble)"
    )
    parser.add_argument(
        "--b-line-run", help="with --meander-run: one defender per Red (DIR,...: an ensemble)"
    )
    parser.add_argument("--meander-run", help="the Meander defender's run(s) (with --b-line-run)")
    parser.add_argument("--episodes", type=int, default=1000, help="episodes a cell")
    parser.add_argument("--seed", type=int, default=153, help="evaluation seed (every cell)")
    parser.add_argument("--step", type=int, help="checkpoint update step (default: latest)")
    parser.add_argument("--stochastic", action="store_true", help="sample actions, not the mode")
    parser.add_argument("--json", type=Path, help="also write the scores to this JSON file")
    parser.add_argument(
        "--opening",
        help="Blue's first actions of every episode, scripted: A,B,... (0-144; 0-35 reduced)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.cyber_defender``."""
    args = _parser().parse_args(argv)
    pair = (args.b_line_run, args.meander_run)
    paired = [run is not None for run in pair]
    if (args.run_dir is not None) == any(paired) or any(paired) != all(paired):
        print(
            "error: give --run-dir, or --b-line-run with --meander-run (not both)", file=sys.stderr
        )
        return 2
    ensemble = args.run_dir is not None and "," in args.run_dir
    if args.step is not None and (args.run_dir is None or ensemble):
        print(
            "error: --step needs one --run-dir (combined runs play their latest)", file=sys.stderr
        )
        return 2
    try:
        opening = parse_opening(args.opening) if args.opening is not None else ()
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json and not args.json.parent.is_dir():  # refuse before the evaluation, not after
        print(f"error: --json {args.json}: no directory {args.json.parent}", file=sys.stderr)
        return 2
    play = {"episodes": args.episodes, "seed": args.seed, "deterministic": not args.stochastic,
            "opening": opening}  # fmt: skip
    try:
        if ensemble:
            results = [evaluate_ensemble(args.run_dir, **play)]
        elif args.run_dir is not None:
            results = evaluate_defender(args.run_dir, step=args.step, **play)
        else:
            results = [evaluate_pair(*pair, **play)]
    except (CheckpointError, ConfigError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("\n\n".join(report(s) for s in results))
    if args.json:
        payload = [s.to_json() for s in results]
        args.json.write_text(json.dumps(payload[0] if len(payload) == 1 else payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
