"""``selfplay:`` the self-play league of two-team envs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jaxrl.config.errors import apply_env_overrides, require
from jaxrl.config.mesh import mesh_size

if TYPE_CHECKING:
    from jaxrl.config.env import BuiltEnv
    from jaxrl.config.root import Config

PFSP = ("hard", "variance", "uniform")
SIDES = ("random", "first")
EXPLOITER_TARGETS = ("current", "frozen")


@dataclass(frozen=True)
class SelfPlayConfig:
    """Self-play league for two-team envs: an in-graph pool of past policies (off by default)."""

    pool_size: int = 0  # K snapshots of the policy kept on device; 0 = self-play off
    snapshot_every: int = 20  # updates between snapshots (while self-play is on)
    latest_fraction: float = 0.2  # training envs whose opponent is the current policy
    rule_fraction: float = 0.2  # training envs whose opponent is the env's RulePolicy
    lanes: int = 4  # the other envs form this many equal lanes, one pool snapshot each
    pfsp: str = "hard"  # snapshot sampling: hard (1-w)^2 | variance w(1-w) | uniform
    result_decay: float = 0.98  # per-update decay of the per-snapshot win/draw/loss counts
    elo_damping_games: float = 16.0  # in-graph Elo: prior on the last rating, in even games
    sides: str = "random"  # random: learner's team drawn per env and match; first: team 0
    # Exploiters (jaxrl.league.exploiters): learners trained in the same program only against
    # the current policy; one that beats it often enough joins the pool and restarts from it.
    exploiters: int = 0  # exploiter learners; 0 = none (the program is the same as without)
    exploiter_fraction: float = 0.25  # each exploiter's training envs, a fraction of num_envs
    exploiter_threshold: float = 0.5  # hand off above this decayed win fraction vs the learner
    exploiter_min_games: float = 32.0  # ... once its decayed game count reaches this
    # current: play the main agent's policy of every update (a moving target); frozen: play
    # the main agent's policy as it was when the exploiter last (re)started, as
    # jaxrl.commands.exploit's best responses do, so a hand-off means it beat one fixed policy
    exploiter_target: str = "current"
    # frozen: an exploiter that has not handed off after this many of its updates restarts
    # from the main agent's current weights and freezes its current policy (0 = never)
    exploiter_refresh_updates: int = 0
    # EnvParams overrides of the exploiters' matches, on top of the league's (the last
    # curriculum stage's) params: e.g. {team_size_weights: [0, 0.5, 0.5]} to hunt at 2v2 and
    # 3v3 only. The learner's own matches and the pool's lanes are unchanged.
    exploiter_env: dict[str, Any] = field(default_factory=dict)
    # Population league (jaxrl.league.population): with several members (train.num_seeds or a
    # sweep), a pool lane's next opponent is another member's current policy with this
    # probability (chosen by league rating, PFSP-style), else a snapshot of its own pool.
    cross_member: float = 0.0  # chance a pool lane's draw is another member; 0 = off

    def exploiter_envs(self, num_envs: int) -> int:
        """Training envs of each exploiter for ``num_envs`` learner envs (rounded)."""
        return round(self.exploiter_fraction * num_envs)

    def split(self, num_envs: int) -> tuple[int, int, int]:
        """``(latest, rule, pool)``: one device's ``num_envs`` training envs by opponent group
        (the two fractions rounded, the rest for the pool lanes)."""
        latest = round(self.latest_fraction * num_envs)
        rule = round(self.rule_fraction * num_envs)
        return latest, rule, num_envs - latest - rule


def validate(config: Config) -> None:
    """Values of ``selfplay:`` and its lanes against the envs on each device."""
    sp = config.selfplay
    require(sp.pool_size >= 0, f"selfplay.pool_size must be >= 0, got {sp.pool_size}")
    require(
        sp.sides in SIDES, f"selfplay.sides must be one of {', '.join(SIDES)}, got {sp.sides!r}"
    )
    require(sp.exploiters >= 0, f"selfplay.exploiters must be >= 0, got {sp.exploiters}")
    if sp.exploiters:
        validate_exploiters(config)
    require(
        0.0 <= sp.cross_member <= 1.0,
        f"selfplay.cross_member must be in [0, 1], got {sp.cross_member}",
    )
    if sp.cross_member > 0:
        validate_cross_member(config)
    if sp.pool_size == 0:
        return
    require(
        sp.snapshot_every >= 1, f"selfplay.snapshot_every must be >= 1, got {sp.snapshot_every}"
    )
    fractions = {"latest_fraction": sp.latest_fraction, "rule_fraction": sp.rule_fraction}
    for key, value in fractions.items():
        require(0.0 <= value <= 1.0, f"selfplay.{key} must be in [0, 1], got {value}")
    require(
        sp.latest_fraction + sp.rule_fraction <= 1.0,
        "selfplay.latest_fraction + selfplay.rule_fraction must be <= 1, got "
        f"{sp.latest_fraction + sp.rule_fraction:g}",
    )
    require(sp.pfsp in PFSP, f"selfplay.pfsp must be one of {', '.join(PFSP)}, got {sp.pfsp!r}")
    require(
        0.0 < sp.result_decay <= 1.0,
        f"selfplay.result_decay must be in (0, 1], got {sp.result_decay}",
    )
    require(
        sp.elo_damping_games >= 0,
        f"selfplay.elo_damping_games must be >= 0, got {sp.elo_damping_games}",
    )
    require(sp.lanes >= 1, f"selfplay.lanes must be >= 1, got {sp.lanes}")


def validate_lanes(config: Config) -> None:
    """The pool envs on each device divide into ``selfplay.lanes`` equal lanes."""
    sp = config.selfplay
    count = mesh_size(config)
    num_envs = config.env.num_envs // count  # the groups are laid out on every device
    latest, rule, pool = sp.split(num_envs)
    per_device = f" per device ({count} devices)" if count > 1 else ""
    require(
        pool % sp.lanes == 0,
        f"selfplay.lanes: the {pool} pool envs{per_device} (env.num_envs {num_envs} - {latest} "
        f"latest - {rule} rule) do not divide into {sp.lanes} equal lanes",
    )


def validate_cross_member(config: Config) -> None:
    """``selfplay.cross_member`` > 0: members play each other in the pool lanes."""
    sp = config.selfplay
    require(
        sp.pool_size > 0,
        "selfplay.cross_member: members meet in the pool lanes; set selfplay.pool_size > 0",
    )
    require(
        config.num_members >= 2,
        "selfplay.cross_member needs a population (train.num_seeds x sweep points >= 2), got "
        f"{config.num_members} member",
    )


def validate_cross_member_envs(config: Config) -> None:
    """``selfplay.cross_member`` > 0: the pool lanes on each device hold envs."""
    _, _, pool = config.selfplay.split(config.env.num_envs // mesh_size(config))
    require(
        pool > 0,
        "selfplay.cross_member: members meet in the pool lanes, but latest_fraction + "
        "rule_fraction leave no env for them",
    )


def validate_exploiters(config: Config) -> None:
    """``selfplay.exploiter_*`` when ``selfplay.exploiters`` > 0: values, and what they need."""
    sp = config.selfplay
    require(
        sp.pool_size > 0,
        "selfplay.exploiters: exploiters feed the pool; set selfplay.pool_size > 0",
    )
    require(
        0.0 <= sp.exploiter_threshold < 1.0,
        f"selfplay.exploiter_threshold must be in [0, 1), got {sp.exploiter_threshold}",
    )
    require(
        sp.exploiter_min_games >= 0,
        f"selfplay.exploiter_min_games must be >= 0, got {sp.exploiter_min_games}",
    )
    require(
        0.0 < sp.exploiter_fraction <= 1.0,
        f"selfplay.exploiter_fraction must be in (0, 1], got {sp.exploiter_fraction}",
    )
    require(
        sp.exploiter_target in EXPLOITER_TARGETS,
        f"selfplay.exploiter_target must be one of {', '.join(EXPLOITER_TARGETS)}, got "
        f"{sp.exploiter_target!r}",
    )
    require(
        sp.exploiter_refresh_updates >= 0,
        f"selfplay.exploiter_refresh_updates must be >= 0, got {sp.exploiter_refresh_updates}",
    )
    require(
        sp.exploiter_refresh_updates == 0 or sp.exploiter_target == "frozen",
        "selfplay.exploiter_refresh_updates needs selfplay.exploiter_target: frozen (a current "
        "target is refreshed every update)",
    )


def validate_exploiter_envs(config: Config) -> None:
    """Each exploiter's envs on a device: at least one, and sequences that divide into the
    minibatches."""
    sp, ppo = config.selfplay, config.ppo
    count = mesh_size(config)
    num_envs = config.env.num_envs // count  # an exploiter's envs are sharded like the learner's
    per_device = f" per device ({count} devices)" if count > 1 else ""
    envs = sp.exploiter_envs(num_envs)
    require(
        envs >= 1,
        f"selfplay.exploiter_fraction: {sp.exploiter_fraction} of "
        f"{num_envs} envs{per_device} rounds to no env",
    )
    sequences = envs * ppo.num_steps // config.sequence_length
    require(
        sequences % ppo.num_minibatches == 0,
        f"selfplay.exploiter_fraction: an exploiter's {sequences} sequences ({envs} envs"
        f"{per_device}) do not divide into ppo.num_minibatches {ppo.num_minibatches}",
    )


def validate_env(config: Config, built: BuiltEnv) -> None:
    """Self-play needs a two-team env (:class:`jaxrl.envs.protocols.TwoTeamEnv`); the exploiters'
    env overrides fit its params."""
    from jaxrl.envs import protocols  # noqa: PLC0415 - keep config importable without building envs

    sp = config.selfplay
    if sp.pool_size <= 0:  # off (or refused by validate)
        return
    problem = protocols.league_problem(built.env)
    require(problem is None, f"selfplay: {config.env.name} {problem}")
    # The per-device sizes ask JAX for the devices: with the env checks, after validate.
    if sp.exploiters:
        validate_exploiter_envs(config)
    if sp.cross_member > 0:
        validate_cross_member_envs(config)
    validate_lanes(config)
    if sp.exploiters:
        apply_env_overrides("selfplay.exploiter_env", sp.exploiter_env, built.params)
