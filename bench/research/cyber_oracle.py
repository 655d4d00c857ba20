"""What a Blue that sees CAGE2's true state scores against B_line: a yardstick for the B_line cells.

    python -m bench.research.cyber_oracle [--episodes N] [--seed S] [--fix-bugs]

The oracle reads :class:`jaxrl.envs.cyber.env.EnvState` (B_line's user host, Red's shells and
whether each runs as root or hides from Remove), which no defender sees; it even knows B_line's user
host at step 0, which jaxrl draws at reset and CybORG's B_line only at step 1. Each step,
first match wins:

1. Red holds a shell on Op_Server0, Enterprise2, Enterprise1 or Enterprise0 (in that order):
   Remove it if Remove can kill it (a detected user-level shell), else Restore the host.
2. Place the next decoy not yet in place: at steps 0 and 1, when B_line drew User2, Femitter
   and Tomcat there (CardiffUni's opening; decoys count on a user host only before B_line's
   one port scan of it, at step 1, and only User2's top exploit can be lured); then B_line's
   hop (``tables.NEXT_HOP`` of its user host: Femitter on Enterprise1, HarakaSMPT, Tomcat and
   Apache on Enterprise0); then Femitter on Enterprise2 and HarakaSMPT, Apache and Tomcat on
   Op_Server0.
3. Sleep.

Prints the returns after 30, 50 and 100 steps (the same episodes' prefixes, as the fidelity
bench plays them), and the 100-step return by the user host B_line drew.
"""

from __future__ import annotations

import argparse
import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import envs
from jaxrl.envs.cyber import blue, red
from jaxrl.envs.cyber import env as cyber_env
from jaxrl.envs.cyber import tables as tb

from .cyber_fidelity import LENGTHS, _cumulative

USERS = (tb.USER1, tb.USER2, tb.USER3, tb.USER4)


def oracle_action(state: cyber_env.EnvState) -> jax.Array:
    """The oracle's CybORG action (int32 ()) for the true ``state`` (rules in the docstring)."""
    hop = jnp.asarray(tb.NEXT_HOP)[state.bline_user]
    room = cyber_env.decoy_room(state.decoys, jnp.bool_(False))  # [13, 8]
    # The same decoys as jaxrl.envs.cyber.blue.hop_guard, in its order: User2's opening, the hop's,
    # then Enterprise2's and Op_Server0's; the opening only when B_line drew User2.
    opening = (state.bline_user == tb.USER2) & (state.time < len(blue.GUARD_OPENING_DECOYS))
    wish = [(opening, h, d) for h, d in blue.GUARD_OPENING_DECOYS]
    wish += [
        (hop == hop_host, h, d) for hop_host, pairs in blue.HOP_DECOYS.items() for h, d in pairs
    ]
    wish += [(jnp.bool_(True), h, d) for h, d in blue.GUARD_DECOYS]
    decoy = blue.first_decoy(
        [(valid & room[h, d] & ~state.decoys[h, d], h, d) for valid, h, d in wish]
    )
    action = jnp.where(decoy >= 0, decoy, tb.SLEEP)
    for h in reversed(blue.GUARDED.tolist()):  # then remediation, in GUARDED's priority, overrides
        removable = (state.access[h] == 1) & ~state.root_shell[h] & ~state.hidden_shell[h]
        fix = jnp.where(removable, tb.REMOVE + h, tb.RESTORE + h)
        action = jnp.where(state.access[h] >= 1, fix, action)
    return action.astype(jnp.int32)


def play(num_episodes: int, seed: int, fix_bugs: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(returns float64 [3, N] after 30/50/100 steps, B_line's user host int [N])``."""
    _, params = envs.make("CAGE2", max_steps_in_episode=max(LENGTHS), fix_bugs=fix_bugs)
    params = params.replace(red_agent=red.BLINE_AGENT)

    def episode(key):
        key_reset, key_steps = jax.random.split(key)
        state = cyber_env.initial_state(key_reset, params)

        def body(state, key_step):
            state, terms, _ = cyber_env.transition(key_step, state, oracle_action(state), params)
            return state, sum(terms.values())

        _, rewards = jax.lax.scan(body, state, jax.random.split(key_steps, max(LENGTHS)))
        return _cumulative(rewards), state.bline_user

    keys = jax.random.split(jax.random.key(seed), num_episodes)
    returns, users = jax.jit(jax.vmap(episode))(keys)
    return np.asarray(returns, np.float64).T, np.asarray(users)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=153)
    parser.add_argument("--fix-bugs", action="store_true", help="CybORG++'s fixes, not 2.1's bugs")
    args = parser.parse_args(argv)
    if args.episodes < 2:
        parser.error(f"--episodes must be at least 2, got {args.episodes}")
    returns, users = play(args.episodes, args.seed, args.fix_bugs)
    cells = [
        f"{values.mean():.2f} +- {values.std(ddof=1) / math.sqrt(len(values)):.2f}"
        for values in returns
    ]
    print(f"oracle vs B_line, {'fixed' if args.fix_bugs else '2.1'} bugs, {args.episodes} episodes")
    print("30 / 50 / 100 steps: " + " / ".join(cells))
    for user in USERS:
        picked = returns[-1][users == user]
        print(f"  B_line's user host {tb.HOSTS[user]}: {len(picked)} episodes, 100 steps "
              f"{picked.mean():.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
