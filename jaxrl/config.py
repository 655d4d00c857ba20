"""The one typed, frozen run configuration.

YAML files in ``configs/`` map 1:1 onto :class:`Config`. :func:`load_config` reads a file,
applies ``section.key=value`` overrides, rejects unknown keys, wrong types and impossible
values with a one-line :class:`ConfigError` naming the key, and never writes back:
derived sizes are properties.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dacite
import yaml

PRECISIONS = ("float32", "bfloat16", "auto")
ACTIVATIONS = ("tanh", "relu", "elu", "gelu", "silu")
CORES = ("none", "gru", "lstm")
PFSP = ("hard", "variance", "uniform")
WANDB_MODES = ("online", "offline")
SIDES = ("random", "first")
SWITCHABLE = ("selfplay",)  # features a curriculum stage can switch on (off elsewhere)
# Hyperparameters a sweep may vary (traced: no recompile per value) -> Hyper field.
SWEEPABLE = {
    "ppo.lr": "lr",
    "ppo.ent_coef": "ent_coef",
    "ppo.clip_eps": "clip_eps",
    "ppo.gamma": "gamma",
    "ppo.gae_lambda": "gae_lambda",
    "ppo.vf_coef": "vf_coef",
}


class ConfigError(ValueError):
    """A configuration problem, with a one-line message naming the offending key.

    The message is kept to one line whatever it wraps (an env's or a library's error text).
    """

    def __init__(self, message: str):
        lines = (line.strip() for line in str(message).splitlines())
        super().__init__(" ".join(line for line in lines if line))


@dataclass(frozen=True)
class EnvConfig:
    """Which environment and how many instances."""

    name: str = "CartPole-v1"  # registered env name (gymnax name or ours)
    num_envs: int = 4  # parallel env instances (vmapped)
    kwargs: dict[str, Any] = field(default_factory=dict)  # overrides of the env's EnvParams
    action_repeat: int = 1  # env steps per agent decision; rewards summed
    normalize_obs: bool = False  # running mean/var observation normalisation


@dataclass(frozen=True)
class NetworkConfig:
    """Actor-critic network."""

    hidden_sizes: tuple[int, ...] = (64, 64)  # MLP torso widths
    activation: str = "tanh"  # one of ACTIVATIONS
    shared_torso: bool = False  # one torso for actor and critic, or one each
    core: str = "none"  # recurrent core between torso and heads: none | gru | lstm
    core_size: int = 128  # recurrent core width
    core_unroll: int = 0  # core scan steps per loop iteration; 0: 1 on CPU, a sequence on GPU/TPU


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters."""

    num_steps: int = 128  # rollout length T per update
    update_epochs: int = 4  # passes over each rollout
    num_minibatches: int = 4  # minibatches per epoch
    sequence_length: int = 0  # recurrent: BPTT chunk length (divides num_steps); 0 = num_steps
    lr: float = 2.5e-4  # Adam learning rate
    anneal_lr: bool = True  # linear decay of lr to 0 over training
    adam_eps: float = 1e-5  # Adam epsilon
    gamma: float = 0.99  # discount
    gae_lambda: float = 0.95  # GAE lambda
    clip_eps: float = 0.2  # policy ratio clip
    clip_value: bool = True  # clip the value update to +-clip_eps around the old value
    ent_coef: float = 0.01  # entropy bonus weight
    vf_coef: float = 0.5  # value loss weight
    max_grad_norm: float = 0.5  # global-norm gradient clip
    normalize_advantages: bool = True  # per-minibatch advantage normalisation
    reward_scale: float = 1.0  # rewards are multiplied by this before GAE


@dataclass(frozen=True)
class TrainConfig:
    """Length of training and the host loop."""

    total_steps: int = 500_000  # env steps summed over envs (one decision of each env's agents)
    updates_per_chunk: int = 32  # updates per compiled call; the host sees metrics between
    max_nonfinite_updates: int = 10  # stop after this many non-finite updates in a row
    progress_bar: bool = True  # tqdm progress bar on stderr
    num_seeds: int = 1  # independent runs (seeds seed .. seed+N-1) vmapped in one program


@dataclass(frozen=True)
class CheckpointConfig:
    """Orbax checkpointing."""

    every_updates: int = 100  # save at the first chunk end after every N updates; 0: end only
    keep: int = 3  # keep the last k checkpoints


@dataclass(frozen=True)
class StageConfig:
    """One curriculum stage: env-param overrides and the rule that promotes out of it."""

    name: str = ""  # shown in logs
    env: dict[str, Any] = field(default_factory=dict)  # EnvParams overrides in this stage
    metric: str = "episode_return"  # update metric that promotes (see jaxrl/curriculum.py)
    threshold: float = 0.0  # promote when the window mean reaches this
    window: int = 10  # updates (with finished episodes) averaged
    min_updates: int = 0  # updates spent in the stage before promotion is possible
    features: dict[str, bool] = field(default_factory=dict)  # {selfplay: true} switches it on


@dataclass(frozen=True)
class CurriculumConfig:
    """Stages switched inside the compiled step (none by default)."""

    stages: tuple[StageConfig, ...] = ()  # in order; the last stage is never left
    replay: float = 0.0  # fraction of training envs kept on earlier stages (spread evenly)


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


@dataclass(frozen=True)
class EvalLaneConfig:
    """One evaluation lane: envs that measure the learner and never train it."""

    name: str = ""  # logged as eval/<name>/win, .../elo, ...
    envs: int = 8  # envs in the lane
    env: dict[str, Any] = field(default_factory=dict)  # EnvParams overrides over env.kwargs


@dataclass(frozen=True)
class EvaluationConfig:
    """In-graph evaluation lanes (none by default)."""

    lanes: tuple[EvalLaneConfig, ...] = ()  # e.g. the RulePolicy at each team size
    every_updates: int = 10  # report (and restart) each lane's counts every N updates
    deterministic: bool = True  # lanes play the mode of the policy


@dataclass(frozen=True)
class WandbConfig:
    """Weights & Biases logging beside TensorBoard: off unless a project is named."""

    project: str = ""  # W&B project; "" = no W&B logging (needs pip install '.[wandb]')
    mode: str = "online"  # online | offline (kept in RUN_DIR/wandb; wandb sync later)


@dataclass(frozen=True)
class LoggerConfig:
    """Where scalars go besides TensorBoard (which is always written)."""

    wandb: WandbConfig = field(default_factory=WandbConfig)


@dataclass(frozen=True)
class MeshConfig:
    """Devices the env batch is sharded over (params replicated, gradients averaged)."""

    devices: Any = "all"  # "all" (every device of every process) or a number of devices


@dataclass(frozen=True)
class Config:
    """A whole run."""

    seed: int = 0  # master seed; same seed, same bits
    precision: str = "float32"  # float32 | bfloat16 | auto (bf16 on GPU/TPU, f32 on CPU)
    env: EnvConfig = field(default_factory=EnvConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    sweep: dict[str, list[float]] = field(default_factory=dict)  # {ppo.lr: [1e-4, 3e-4]}
    mesh: MeshConfig = field(default_factory=MeshConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)

    # ---- derived sizes -------------------------------------------------------------------
    @property
    def num_members(self) -> int:
        """Runs trained together: sweep points x seeds."""
        points = len(next(iter(self.sweep.values()))) if self.sweep else 1
        return points * self.train.num_seeds

    @property
    def batch_size(self) -> int:
        """Env steps per update: ``num_envs * num_steps`` (x actors per env transitions)."""
        return self.env.num_envs * self.ppo.num_steps

    @property
    def minibatch_size(self) -> int:
        """Transitions per minibatch."""
        return self.batch_size // self.ppo.num_minibatches

    @property
    def sequence_length(self) -> int:
        """Time steps per training sequence: 1 without a core (samples shuffle freely)."""
        if self.network.core == "none":
            return 1
        return self.ppo.sequence_length or self.ppo.num_steps

    @property
    def num_sequences(self) -> int:
        """Training sequences per update; minibatches shuffle whole sequences."""
        return self.batch_size // self.sequence_length

    @property
    def num_updates(self) -> int:
        """Updates in the whole run: ``total_steps // batch_size``."""
        return self.train.total_steps // self.batch_size

    @property
    def num_chunks(self) -> int:
        """Compiled calls in the whole run (the last may be partly idle)."""
        return -(-self.num_updates // self.chunk_updates)

    @property
    def chunk_updates(self) -> int:
        """Updates per compiled call, never more than the run has."""
        return min(self.train.updates_per_chunk, self.num_updates)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (tuples as lists), as written to ``config.yaml``."""
        return _plain(dataclasses.asdict(self))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# ---- loading ------------------------------------------------------------------------------


def _to_int(value: Any) -> Any:
    # "1e5" (a string to YAML 1.1) or 1e+5 (a float) for an int key: fine when whole.
    if isinstance(value, bool) or isinstance(value, int):
        return value
    number = _to_float(value)
    if isinstance(number, float) and number.is_integer():
        return int(number)
    return value  # dacite then refuses it, and _wrong_type names the key


def _to_float(value: Any) -> Any:
    # YAML 1.1 reads "1e-3" as a string and "1" as an int; both are fine for a float key.
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


_DACITE = dacite.Config(strict=True, cast=[tuple], type_hooks={float: _to_float, int: _to_int})


def _check_keys(cls: type, data: Any, prefix: str) -> None:
    """Reject keys that are not fields (and booleans given for numbers), naming the key."""
    if not isinstance(data, dict):
        where = prefix.rstrip(".") or "the config"
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__} {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in data.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
            raise ConfigError(f"unknown config key {prefix}{key}{hint}")
        sub = fields[key].type
        sub_name = sub if isinstance(sub, str) else getattr(sub, "__name__", "")
        sub_cls = _DATACLASSES.get(sub_name)
        item_cls = _DATACLASSES.get(sub_name.removeprefix("tuple[").split(",")[0])
        if sub_cls is not None:
            _check_keys(sub_cls, {} if value is None else value, f"{prefix}{key}.")
        elif sub_name.startswith("tuple[") and item_cls is not None:
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"config key {prefix}{key}: expected a list, got {value!r}")
            for i, item in enumerate(value):
                _check_keys(item_cls, item, f"{prefix}{key}[{i}].")
        elif sub_name.startswith("tuple[") and not isinstance(value, (list, tuple)):
            # dacite would cast a string to a tuple of its characters
            raise ConfigError(f"config key {prefix}{key}: expected a list, got {value!r}")
        elif _numeric(sub_name) and _has_bool(value):
            # YAML true/false are ints to Python (and to dacite); never a valid number here.
            raise ConfigError(f"config key {prefix}{key}: expected {sub_name}, got {value!r}")


def _numeric(type_name: str) -> bool:
    return type_name in ("int", "float") or type_name.startswith("tuple[int")


def _has_bool(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, bool) for v in value)
    return isinstance(value, bool)


_DATACLASSES = {
    c.__name__: c
    for c in (
        EnvConfig,
        NetworkConfig,
        PPOConfig,
        TrainConfig,
        CheckpointConfig,
        StageConfig,
        CurriculumConfig,
        SelfPlayConfig,
        EvalLaneConfig,
        EvaluationConfig,
        MeshConfig,
        WandbConfig,
        LoggerConfig,
        Config,
    )
}


_SECTIONS = (
    "env",
    "network",
    "ppo",
    "train",
    "checkpoint",
    "curriculum",
    "selfplay",
    "evaluation",
    "sweep",
    "mesh",
    "logger",
)
CURRICULUM_METRICS = ("episode_return", "episode_length")


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"override {dotted}: {part} is not a section")
        node = child
    node[parts[-1]] = value


def parse_overrides(overrides: list[str]) -> list[tuple[str, Any]]:
    """Parse ``section.key=value`` strings; values are read as YAML (``1e-3``, ``[64, 64]``)."""
    parsed = []
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not of the form section.key=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as err:
            raise ConfigError(
                f"override {item!r}: the value is not valid YAML ({_yaml_problem(err)}, at "
                f"column {_yaml_column(err)} of {raw!r})"
            ) from None
        parsed.append((key.strip(), value))
    return parsed


def config_from_dict(data: dict[str, Any] | None) -> Config:
    """Build and validate a :class:`Config` from a nested dict."""
    data = {} if data is None else data
    # A section whose keys are all commented out reads as null: treat it as empty.
    data = {k: ({} if v is None and k in _SECTIONS else v) for k, v in data.items()}
    _check_keys(Config, data, "")
    try:
        config = dacite.from_dict(Config, data, config=_DACITE)
    except dacite.WrongTypeError as err:
        expected = _type_name(err.field_type)
        if expected == "int" and isinstance(_to_float(err.value), float):
            expected = "a whole number"  # 1.5 or "1.5e0": a number, but not an int
        raise ConfigError(
            f"config key {err.field_path}: expected {expected}, got {err.value!r}"
        ) from None
    except dacite.DaciteError as err:
        raise ConfigError(f"invalid config: {err}") from None
    validate(config)
    return config


_YAML_KINDS = {"list": "a list", "int": "a number", "float": "a number", "str": "a string",
               "bool": "a boolean"}  # fmt: skip


def _yaml_problem(err: yaml.YAMLError) -> str:
    """What PyYAML found wrong, without its multi-line excerpt of the text."""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context, mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and mark is not None:
        context += f" that starts at line {mark.line + 1}, column {mark.column + 1}"
    return f"{problem} ({context})" if context else problem


def _yaml_column(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    return str(mark.column + 1) if mark is not None else "?"


def _type_name(tp: Any) -> str:
    args = getattr(tp, "__args__", None)
    if getattr(tp, "__origin__", None) is tuple and args:
        return f"a list of {_type_name(args[0])}"  # tuple[int, ...]: a YAML list of ints
    return getattr(tp, "__name__", str(tp))


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Read a YAML config file (or the defaults when ``path`` is None) and apply overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else f"{path}"
            raise ConfigError(f"{where}: not valid YAML: {_yaml_problem(err)}") from None
        if data is None:
            raise ConfigError(
                f"config file {path} is empty; give at least one section (e.g. env:), or "
                "copy one from configs/"
            )
        if not isinstance(data, dict):
            raise ConfigError(
                f"config file {path}: the top level must be a mapping of sections (env:, "
                f"ppo:, ...), got {_YAML_KINDS.get(type(data).__name__, type(data).__name__)}"
            )
    for key, value in parse_overrides(overrides or []):
        _set_path(data, key, value)
    return config_from_dict(data)


def load_run_config(run_dir: str | Path) -> Config:
    """The saved config of a run, set to play its policy on one device here.

    Evaluation, rendering and tournaments read only the replicated policy item, so a run
    trained on any number of devices or processes restores on this one.
    """
    return load_config(Path(run_dir) / "config.yaml", ["mesh.devices=1"])


def save_config(config: Config, path: str | Path) -> None:
    """Write the resolved config as YAML (loadable by :func:`load_config`)."""
    Path(path).write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))


# ---- validation ---------------------------------------------------------------------------


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def validate(config: Config) -> None:
    """Check values and cross-field constraints; raise :class:`ConfigError` on the first."""
    import envs  # local: keep config importable without building envs

    env, ppo, train, net, ckpt = (
        config.env,
        config.ppo,
        config.train,
        config.network,
        config.checkpoint,
    )
    _require(
        env.name in envs.registered_envs(),
        f"env.name: unknown environment {env.name!r}" + _suggest(env.name, envs.registered_envs()),
    )
    _, default_params = envs.make(env.name)
    _check_overrides("env.kwargs", env.kwargs, default_params, staged=False)
    try:
        base_env, base_params = envs.make(env.name, **env.kwargs)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"env.kwargs: {err}") from None
    _require(env.num_envs >= 1, f"env.num_envs must be >= 1, got {env.num_envs}")
    _require(env.action_repeat >= 1, f"env.action_repeat must be >= 1, got {env.action_repeat}")
    _require(
        config.precision in PRECISIONS,
        f"precision must be one of {', '.join(PRECISIONS)}, got {config.precision!r}",
    )
    _require(
        net.activation in ACTIVATIONS,
        f"network.activation must be one of {', '.join(ACTIVATIONS)}, got {net.activation!r}",
    )
    _require(
        len(net.hidden_sizes) >= 1 and all(h >= 1 for h in net.hidden_sizes),
        f"network.hidden_sizes must be positive widths, got {list(net.hidden_sizes)}",
    )
    _require(net.core in CORES, f"network.core must be one of {', '.join(CORES)}, got {net.core!r}")
    _require(net.core_size >= 1, f"network.core_size must be >= 1, got {net.core_size}")
    _require(net.core_unroll >= 0, f"network.core_unroll must be >= 0, got {net.core_unroll}")
    _require(ppo.num_steps >= 1, f"ppo.num_steps must be >= 1, got {ppo.num_steps}")
    _require(
        ppo.sequence_length == 0
        or (ppo.sequence_length > 0 and ppo.num_steps % ppo.sequence_length == 0),
        f"ppo.sequence_length ({ppo.sequence_length}) must divide ppo.num_steps "
        f"({ppo.num_steps}) (0 = whole rollout)",
    )
    _require(ppo.update_epochs >= 1, f"ppo.update_epochs must be >= 1, got {ppo.update_epochs}")
    _require(
        ppo.num_minibatches >= 1,
        f"ppo.num_minibatches must be >= 1, got {ppo.num_minibatches}",
    )
    _require(
        config.batch_size % ppo.num_minibatches == 0,
        f"ppo.num_minibatches: batch of {config.batch_size} (env.num_envs x ppo.num_steps) "
        f"does not divide into {ppo.num_minibatches} minibatches",
    )
    _require(
        config.num_sequences % ppo.num_minibatches == 0,
        f"ppo.num_minibatches: {config.num_sequences} sequences of {config.sequence_length} "
        f"steps (env.num_envs x ppo.num_steps / sequence_length) do not divide into "
        f"{ppo.num_minibatches} minibatches",
    )
    _require(0 < ppo.lr < math.inf, f"ppo.lr must be a finite number > 0, got {ppo.lr}")
    _require(ppo.adam_eps > 0, f"ppo.adam_eps must be > 0, got {ppo.adam_eps}")
    _require(0 <= ppo.gamma <= 1, f"ppo.gamma must be in [0, 1], got {ppo.gamma}")
    _require(0 <= ppo.gae_lambda <= 1, f"ppo.gae_lambda must be in [0, 1], got {ppo.gae_lambda}")
    _require(ppo.clip_eps > 0, f"ppo.clip_eps must be > 0, got {ppo.clip_eps}")
    _require(ppo.ent_coef >= 0, f"ppo.ent_coef must be >= 0, got {ppo.ent_coef}")
    _require(ppo.vf_coef >= 0, f"ppo.vf_coef must be >= 0, got {ppo.vf_coef}")
    _require(ppo.max_grad_norm > 0, f"ppo.max_grad_norm must be > 0, got {ppo.max_grad_norm}")
    _require(ppo.reward_scale > 0, f"ppo.reward_scale must be > 0, got {ppo.reward_scale}")
    _require(
        train.total_steps >= config.batch_size,
        f"train.total_steps ({train.total_steps}) is smaller than one batch "
        f"({config.batch_size} = env.num_envs x ppo.num_steps)",
    )
    _require(
        train.updates_per_chunk >= 1,
        f"train.updates_per_chunk must be >= 1, got {train.updates_per_chunk}",
    )
    _require(
        train.max_nonfinite_updates >= 1,
        f"train.max_nonfinite_updates must be >= 1, got {train.max_nonfinite_updates}",
    )
    _require(
        ckpt.every_updates >= 0,
        f"checkpoint.every_updates must be >= 0, got {ckpt.every_updates}",
    )
    _require(ckpt.keep >= 1, f"checkpoint.keep must be >= 1, got {ckpt.keep}")
    for i, stage in enumerate(config.curriculum.stages):
        where = f"curriculum.stages[{i}]"
        # Stage overrides sit on top of env.kwargs (the base params the stage tables start from).
        _check_overrides(f"{where}.env", stage.env, base_params, staged=True)
        try:
            envs.override_params(base_params, stage.env)
        except (ValueError, TypeError) as err:
            raise ConfigError(f"{where}.env: {err}") from None
        _require(
            stage.metric in CURRICULUM_METRICS or stage.metric.startswith("outcome/"),
            f"{where}.metric must be one of {', '.join(CURRICULUM_METRICS)} or "
            f"outcome/<name>, got {stage.metric!r}",
        )
        _require(stage.window >= 1, f"{where}.window must be >= 1, got {stage.window}")
        _require(
            stage.min_updates >= 0, f"{where}.min_updates must be >= 0, got {stage.min_updates}"
        )
        for name, on in stage.features.items():
            _require(
                name in SWITCHABLE,
                f"{where}.features: unknown feature {name!r} (switchable: {', '.join(SWITCHABLE)})",
            )
            _require(isinstance(on, bool), f"{where}.features.{name}: expected true or false")
            _require(
                name != "selfplay" or config.selfplay.pool_size > 0,
                f"{where}.features.selfplay: self-play is not configured (selfplay.pool_size is 0)",
            )
    replay = config.curriculum.replay
    _require(0.0 <= replay < 1.0, f"curriculum.replay must be in [0, 1), got {replay}")
    _require(
        replay == 0.0 or len(config.curriculum.stages) >= 2,
        "curriculum.replay needs at least two curriculum.stages",
    )
    mode = config.logger.wandb.mode
    _require(
        mode in WANDB_MODES,
        f"logger.wandb.mode must be one of {', '.join(WANDB_MODES)}, got {mode!r}",
    )
    _validate_mesh(config)
    _validate_selfplay(config, base_env)
    _validate_evaluation(config, base_params)
    _validate_members(config)


# Each sweepable value must satisfy the rule of its ppo field.
_SWEEP_RULES = {
    "ppo.lr": (lambda v: 0 < v < math.inf, "a finite number > 0"),
    "ppo.ent_coef": (lambda v: v >= 0, ">= 0"),
    "ppo.clip_eps": (lambda v: v > 0, "> 0"),
    "ppo.gamma": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "ppo.gae_lambda": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "ppo.vf_coef": (lambda v: v >= 0, ">= 0"),
}


def _validate_members(config: Config) -> None:
    train = config.train
    _require(train.num_seeds >= 1, f"train.num_seeds must be >= 1, got {train.num_seeds}")
    lengths = set()
    for key, values in config.sweep.items():
        _require(
            key in SWEEPABLE,
            f"sweep: {key!r} cannot be swept (sweepable: {', '.join(SWEEPABLE)})"
            + _suggest(str(key), list(SWEEPABLE)),
        )
        _require(
            isinstance(values, (list, tuple)) and len(values) >= 1,
            f"sweep.{key}: expected a non-empty list of numbers, got {values!r}",
        )
        rule, text = _SWEEP_RULES[key]
        for value in values:
            _require(
                isinstance(value, (int, float)) and not isinstance(value, bool),
                f"sweep.{key}: expected numbers, got {value!r}",
            )
            _require(rule(float(value)), f"sweep.{key}: every value must be {text}, got {value}")
        lengths.add(len(values))
    _require(
        len(lengths) <= 1,
        "sweep: every list must have the same length (values are zipped), got lengths "
        f"{sorted(lengths)}",
    )


def mesh_size(config: Config) -> int:
    """Devices the env batch would be sharded over (``mesh.devices``, "all": every device)."""
    import jax  # local: config stays importable without starting a backend

    available = jax.device_count()
    devices = config.mesh.devices
    return available if devices == "all" else int(devices)


def _validate_mesh(config: Config) -> None:
    import jax  # local: config stays importable without starting a backend

    devices = config.mesh.devices
    _require(
        devices == "all" or (isinstance(devices, int) and not isinstance(devices, bool)),
        f"mesh.devices must be 'all' or a number of devices, got {devices!r}",
    )
    _require(devices == "all" or devices >= 1, f"mesh.devices must be >= 1, got {devices}")
    available = jax.device_count()
    _require(
        devices == "all" or devices <= available,
        f"mesh.devices: {devices} devices asked for, {available} available",
    )
    count = mesh_size(config)
    if count == 1:
        return
    where = f"over {count} devices (mesh.devices={devices})"
    _require(
        config.env.num_envs % count == 0,
        f"env.num_envs ({config.env.num_envs}) does not divide {where}",
    )
    for i, lane in enumerate(config.evaluation.lanes):
        _require(
            lane.envs % count == 0,
            f"evaluation.lanes[{i}].envs ({lane.envs}) does not divide {where}",
        )


def _validate_selfplay(config: Config, env: Any) -> None:
    """``env``: the run's env, built from ``env.kwargs`` once by :func:`validate`."""
    sp = config.selfplay
    _require(sp.pool_size >= 0, f"selfplay.pool_size must be >= 0, got {sp.pool_size}")
    _require(
        sp.sides in SIDES, f"selfplay.sides must be one of {', '.join(SIDES)}, got {sp.sides!r}"
    )
    if sp.pool_size == 0:
        return
    _require(
        getattr(env, "num_teams", 1) == 2,
        f"selfplay: {config.env.name} is not a two-team env (self-play needs num_teams = 2)",
    )
    _require(
        sp.snapshot_every >= 1, f"selfplay.snapshot_every must be >= 1, got {sp.snapshot_every}"
    )
    for key in ("latest_fraction", "rule_fraction"):
        value = getattr(sp, key)
        _require(0.0 <= value <= 1.0, f"selfplay.{key} must be in [0, 1], got {value}")
    _require(
        sp.latest_fraction + sp.rule_fraction <= 1.0,
        "selfplay.latest_fraction + selfplay.rule_fraction must be <= 1, got "
        f"{sp.latest_fraction + sp.rule_fraction:g}",
    )
    _require(sp.pfsp in PFSP, f"selfplay.pfsp must be one of {', '.join(PFSP)}, got {sp.pfsp!r}")
    _require(
        0.0 < sp.result_decay <= 1.0,
        f"selfplay.result_decay must be in (0, 1], got {sp.result_decay}",
    )
    _require(
        sp.elo_damping_games >= 0,
        f"selfplay.elo_damping_games must be >= 0, got {sp.elo_damping_games}",
    )
    _require(sp.lanes >= 1, f"selfplay.lanes must be >= 1, got {sp.lanes}")
    count = mesh_size(config)
    num_envs = config.env.num_envs // count  # the groups are laid out on every device
    latest = round(sp.latest_fraction * num_envs)
    rule = round(sp.rule_fraction * num_envs)
    pool = num_envs - latest - rule
    per_device = f" per device ({count} devices)" if count > 1 else ""
    _require(
        pool % sp.lanes == 0,
        f"selfplay.lanes: the {pool} pool envs{per_device} (env.num_envs {num_envs} - {latest} "
        f"latest - {rule} rule) do not divide into {sp.lanes} equal lanes",
    )


def _validate_evaluation(config: Config, base_params: Any) -> None:
    import re

    import envs  # local: keep config importable without building envs

    ev = config.evaluation
    _require(
        ev.every_updates >= 1, f"evaluation.every_updates must be >= 1, got {ev.every_updates}"
    )
    names = [lane.name for lane in ev.lanes]
    for i, lane in enumerate(ev.lanes):
        where = f"evaluation.lanes[{i}]"
        _require(
            re.fullmatch(r"[A-Za-z0-9_]+", lane.name) is not None,
            f"{where}.name must be letters, digits or _, got {lane.name!r}",
        )
        _require(names.count(lane.name) == 1, f"{where}.name {lane.name!r} is used twice")
        _require(lane.envs >= 1, f"{where}.envs must be >= 1, got {lane.envs}")
        # Lane params are stacked per env next to the training envs' params: like stages,
        # only array leaves can differ.
        _check_overrides(f"{where}.env", lane.env, base_params, staged=True)
        try:
            envs.override_params(base_params, lane.env)
        except (ValueError, TypeError) as err:
            raise ConfigError(f"{where}.env: {err}") from None


def _check_overrides(where: str, overrides: Any, params: Any, *, staged: bool) -> None:
    """:func:`envs.params.check_overrides`, its error as a :class:`ConfigError`."""
    from envs.params import check_overrides  # noqa: PLC0415 - envs imports gymnax (a backend)

    try:
        check_overrides(where, overrides, params, staged=staged)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {close[0]}?)" if close else ""
