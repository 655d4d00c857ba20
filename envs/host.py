"""Host envs (not JAX): gymnasium's ``SyncVectorEnv`` or an EnvPool pool behind one interface,
and the spaces the trainer reads of them (``env.backend: gymnasium | envpool``).

Both auto-reset in the same step (gymnasium's ``SAME_STEP`` mode; EnvPool's done rows are
reset by id right after the step), so the observation returned by :meth:`HostVecEnv.step` is
always the one the policy acts on next, and the pre-reset observation of a finished episode
comes back apart (``final_obs``), as in the gymnax contract of the JAX path.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


class HostEnvError(ValueError):
    """A host env that cannot be made or is not supported: one line that starts with the
    config key to change (``env.name: ...``, ``env.kwargs: ...``, ``env.backend=...``)."""


def require(ok: bool, message: str) -> None:
    """Raise :class:`HostEnvError` with ``message`` unless ``ok``."""
    if not ok:
        raise HostEnvError(message)


@dataclass(frozen=True)
class HostSpaces:
    """What the trainer needs of a host env's spaces (static).

    Supported: observations a ``Box`` of any shape (``[C, H, W]`` uint8 images go through a
    trainer's CNN encoder); actions ``Discrete(n)`` or a 1-D ``Box``.
    """

    obs_shape: tuple[int, ...]  # one env's observation
    obs_dtype: str  # numpy dtype name of the observations (float32, uint8, ...)
    discrete: bool  # Discrete actions (else a 1-D Box)
    action_dim: int  # number of discrete actions, or the Box's size
    action_low: Any = None  # [A] float32 bounds the env clips to (Box actions), else None
    action_high: Any = None

    @property
    def image(self) -> bool:
        """Three-axis uint8 observations (``[C, H, W]``): the CNN encoder reads them."""
        return len(self.obs_shape) == 3 and self.obs_dtype == "uint8"


def read_spaces(observation_space: Any, action_space: Any, name: str) -> HostSpaces:
    """:class:`HostSpaces` of one env's gymnasium spaces.

    Raises:
      HostEnvError: an unsupported space, in one line naming it.
    """
    import gymnasium  # noqa: PLC0415 - optional dependency

    box, discrete = gymnasium.spaces.Box, gymnasium.spaces.Discrete
    require(
        isinstance(observation_space, box),
        f"env.name: {name} has observation space {observation_space}; "
        "the gymnasium/envpool backends support Box observations only",
    )
    if isinstance(action_space, discrete):
        require(
            int(action_space.start) == 0,
            f"env.name: {name} has action space {action_space}; Discrete actions must start at 0",
        )
        action = {"discrete": True, "action_dim": int(action_space.n)}
    else:
        require(
            isinstance(action_space, box) and len(action_space.shape) == 1,
            f"env.name: {name} has action space {action_space}; "
            "the gymnasium/envpool backends support Discrete or 1-D Box actions only",
        )
        action = {
            "discrete": False,
            "action_dim": int(action_space.shape[0]),
            "action_low": tuple(np.asarray(action_space.low, np.float32).tolist()),
            "action_high": tuple(np.asarray(action_space.high, np.float32).tolist()),
        }
    return HostSpaces(
        obs_shape=tuple(int(n) for n in observation_space.shape),
        obs_dtype=np.dtype(observation_space.dtype).name,
        **action,
    )


@dataclass(frozen=True)
class HostStep:
    """One step of ``B`` host envs (NumPy)."""

    obs: np.ndarray  # [B, *obs_shape] the next observation (post-reset where an episode ended)
    reward: np.ndarray  # [B] float32, the reward the learner trains on
    raw_reward: np.ndarray  # [B] float32, the unclipped game reward (episode statistics)
    terminated: np.ndarray  # [B] bool
    truncated: np.ndarray  # [B] bool
    final_obs: np.ndarray  # [B, *obs_shape] pre-reset observation where done, else ``obs``


class HostVecEnv(Protocol):
    """``B`` host envs stepped together."""

    spaces: HostSpaces
    num_envs: int

    def reset(self) -> np.ndarray:
        """Start every env; returns ``obs [B, *obs_shape]``."""
        ...

    def step(self, action: np.ndarray) -> HostStep:
        """Step every env with ``action [B]`` (or ``[B, A]``), auto-resetting finished ones."""
        ...

    def close(self) -> None:
        """Release the envs."""
        ...


class GymnasiumVec:
    """``gymnasium.make_vec(name, B, "sync")`` in ``SAME_STEP`` auto-reset mode."""

    def __init__(self, name: str, num_envs: int, seed: int, kwargs: dict[str, Any]):
        import gymnasium  # noqa: PLC0415 - optional dependency

        try:
            self.env = gymnasium.make_vec(
                name,
                num_envs=num_envs,
                vectorization_mode="sync",
                vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP},
                **kwargs,
            )
        except gymnasium.error.NamespaceNotFound as err:
            raise HostEnvError(unregistered_namespace(name, err)) from None
        except gymnasium.error.Error as err:
            raise HostEnvError(f"env.name: gymnasium cannot make {name!r}: {err}") from None
        except TypeError as err:
            raise HostEnvError(f"env.kwargs: gymnasium {name}: {err}") from None
        self.num_envs = num_envs
        self.seed = seed
        self.spaces = read_spaces(
            self.env.single_observation_space, self.env.single_action_space, name
        )

    def reset(self) -> np.ndarray:
        obs, _ = self.env.reset(seed=self.seed)
        return np.asarray(obs)

    def step(self, action: np.ndarray) -> HostStep:
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs = np.asarray(obs)
        final_obs = obs
        if "_final_obs" in info:
            done = np.asarray(info["_final_obs"], bool)
            final_obs = obs.copy()
            for i in np.nonzero(done)[0]:
                final_obs[i] = info["final_obs"][i]
        reward = np.asarray(reward, np.float32)
        return HostStep(
            obs=obs,
            reward=reward,
            raw_reward=reward,
            terminated=np.asarray(terminated, bool),
            truncated=np.asarray(truncated, bool),
            final_obs=final_obs,
        )

    def close(self) -> None:
        self.env.close()


class EnvPoolVec:
    """``envpool.make(name, env_type="gymnasium", num_envs=B)``; done rows reset by id.

    For Atari, EnvPool's ``info["reward"]`` is the unclipped game reward: episode returns
    are reported from it, the learner trains on the (clipped, with ``reward_clip``) reward.
    """

    def __init__(self, name: str, num_envs: int, seed: int, kwargs: dict[str, Any]):
        import envpool  # noqa: PLC0415 - optional dependency

        if kwargs.get("episodic_life"):
            raise HostEnvError(
                "env.kwargs.episodic_life: not supported (finished envs are reset by id, which "
                "restarts the whole game); leave it false"
            )
        if name not in envpool.list_all_envs():
            raise HostEnvError(
                f"env.name: envpool has no task {name!r} (see envpool.list_all_envs())"
            )
        try:
            with warnings.catch_warnings():  # gymnasium's Box float64-bounds warning
                warnings.simplefilter("ignore")
                self.env = envpool.make(
                    name, env_type="gymnasium", num_envs=num_envs, seed=seed, **kwargs
                )
                spaces = read_spaces(self.env.observation_space, self.env.action_space, name)
        except (TypeError, ValueError, KeyError) as err:
            raise HostEnvError(f"env.kwargs: envpool {name}: {err}") from None
        self.num_envs = num_envs
        self.spaces = spaces

    def reset(self) -> np.ndarray:
        obs, _ = self.env.reset()
        return np.asarray(obs)

    def step(self, action: np.ndarray) -> HostStep:
        obs, reward, terminated, truncated, info = self.env.step(action)
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        reward = np.asarray(reward, np.float32)
        raw_reward = np.asarray(info.get("reward", reward), np.float32)
        done = np.nonzero(terminated | truncated)[0]
        final_obs = obs
        if done.size:
            final_obs = obs.copy()
            obs = obs.copy()
            reset_obs, _ = self.env.reset(done.astype(np.int32))
            obs[done] = reset_obs
        return HostStep(
            obs=obs,
            reward=reward,
            raw_reward=raw_reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
        )

    def close(self) -> None:
        self.env = None  # EnvPool's pools have no close(): dropping the pool frees its threads


def make_vec(
    backend: str, name: str, num_envs: int, seed: int, kwargs: dict[str, Any]
) -> HostVecEnv:
    """``num_envs`` envs of task ``name`` from ``backend`` (gymnasium | envpool), seeded.

    Raises:
      HostEnvError: the backend's package is not installed, or it cannot make ``name``.
    """
    builders = {"gymnasium": GymnasiumVec, "envpool": EnvPoolVec}
    try:
        return builders[backend](name, num_envs, seed, dict(kwargs))
    except ImportError as err:
        raise HostEnvError(missing_module(backend, name, err)) from None


# What installs a module that a gymnasium env imports (gymnasium's extras, the ALE).
INSTALLS = {
    "Box2D": "gymnasium[box2d]",
    "ale_py": "ale-py",
    "mujoco": "gymnasium[mujoco]",
    "pygame": "gymnasium[classic-control]",
    "cv2": "opencv-python",
}


def unregistered_namespace(name: str, err: Exception) -> str:
    """The one line for a gymnasium id whose namespace is not registered (``ALE/Pong-v5``):
    gymnasium 1.x registers the ALE's ids only once ``ale_py`` is imported."""
    if not name.startswith("ALE/"):
        return f"env.name: gymnasium cannot make {name!r}: {err}"
    if importlib.util.find_spec("ale_py") is None:
        return (
            f"env.name: gymnasium env {name!r} needs the module 'ale_py', which is not "
            "installed: pip install 'ale-py'"
        )
    return f"env.name: gymnasium registers {name!r} once ale_py is imported: env.name=ale_py:{name}"


def missing_module(backend: str, name: str, err: ImportError) -> str:
    """The one line for an ImportError while making ``name``: the backend itself is missing,
    or a module the env needs (named, with what installs it), e.g. ``ale_py``, ``Box2D``."""
    if importlib.util.find_spec(backend) is None:
        return f"env.backend={backend} needs the {backend} package: pip install -e '.[{backend}]'"
    found = re.search(r"No module named '([^']+)'", str(err))
    module = err.name or (found.group(1) if found else "")
    if not module:
        return f"env.name: {backend} cannot make {name!r}: {type(err).__name__}: {err}"
    package = INSTALLS.get(module.split(".")[0], module.split(".")[0])
    return (
        f"env.name: {backend} env {name!r} needs the module {module!r}, which is not "
        f"installed: pip install '{package}'"
    )
