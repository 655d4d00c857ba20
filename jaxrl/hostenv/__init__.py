"""Environments that are not JAX (gymnasium, EnvPool) through an actor-learner split.

``env.backend: gymnasium | envpool`` selects this path. Host envs are stepped in NumPy by an
actor (:mod:`jaxrl.hostenv.actor`) that runs the policy jitted on the actor device; each
rollout is handed to the learner (:mod:`jaxrl.hostenv.learner`), one compiled PPO update built
from the same pieces as the JAX path (:func:`jaxrl.core.gae.gae`,
:func:`jaxrl.core.ppo.update_epochs`, :func:`jaxrl.core.losses.ppo_loss`,
:func:`jaxrl.core.acting.act`); the new parameters go back to the actor.
:mod:`jaxrl.hostenv.source` is the step source (sync or async, ``env.host_mode``) that the
run driver (:mod:`jaxrl.run.driver`) steps, as it steps the JAX path's compiled chunk;
:mod:`jaxrl.hostenv.play` plays a trained host run (evaluate, render, export, ``load_policy``).

Modules:
  spaces: :mod:`jaxrl.envs.host`'s spaces of a host env, with the trainer's errors.
  vecenv: :mod:`jaxrl.envs.host`'s vectorised host env (gymnasium or EnvPool), with its errors.
  networks: a Nature-CNN encoder in front of jaxrl's actor-critic for image observations.
  actor: the rollout on the host.
  learner: the compiled update.
  source: the step source of the run driver: one actor rollout and learner update a step.
  play: a host run's policy restored and played: evaluation, rendering (gymnasium).
"""
