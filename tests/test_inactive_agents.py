"""An inactive agent's steps enter no loss (a dead SMAX unit, a player waiting its turn):
every compiled learner of the PPO and Q families, trained beside a dead agent whose
observations are noise, learns exactly the same parameters whatever that noise is."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.algos import ALGOS
from coplay.core.env import Wrapper

DEAD = 1   # the agent that is never active


class DeadAgent(Wrapper):
    """Agent 1 of `env` never acts (its actions are replaced by 0 before the step) and sees
    noise drawn with `salt`: nothing it sees or does may reach another agent's learning."""

    def __init__(self, env, salt: int):
        super().__init__(env)
        self.salt = salt

    def _mark(self, ts, key):
        noise = 5.0 * jax.random.normal(jax.random.fold_in(key, self.salt), ts.obs.shape[1:])
        return ts.replace(obs=ts.obs.at[DEAD].set(noise), active=ts.active.at[DEAD].set(False))

    def _reset(self, key):
        state, ts = self.env.reset(key)
        return state, self._mark(ts, key)

    def _step(self, state, actions, key):
        state, ts = self.env.step(state, actions.at[DEAD].set(0), key)
        return state, self._mark(ts, key)


SMALL = {"num_envs": 2, "rollout_len": 8, "hidden_size": 8, "num_layers": 1, "mixer_hidden": 8}
Q = {"learning_starts": 32, "batch_size": 8, "buffer_size": 256}
# One learner per code path that weighs agents: PPO's objective and GAE (IPPO, self-play PPO and
# the multi-objective PPOs share them), the independent TD loss, and the mixed one (VDN's too).
LEARNERS = {"mappo": {}, "iql": Q, "qmix": Q}


@pytest.mark.parametrize("algo", sorted(LEARNERS))
def test_a_dead_agents_steps_enter_no_loss(algo):
    entry = ALGOS.get(algo)
    fields = {f.name for f in dataclasses.fields(entry.config)}
    config = entry.config(**{k: v for k, v in {**SMALL, **LEARNERS[algo]}.items() if k in fields})

    def train(salt):
        """(initial, final) parameters of 6 updates beside the dead agent seeing noise `salt`
        (traced: both salts run in one compiled program)."""
        trainer = entry.factory(config, DeadAgent(coplay.make("spread"), salt), 6)
        state = trainer.init(jax.random.PRNGKey(0))
        final = jax.lax.fori_loop(0, 6, lambda _, s: trainer.update(s)[0], state)
        return state.params, final.params

    def largest_difference(x, y):
        return max(float(np.abs(np.asarray(u) - np.asarray(v)).max()) for u, v in zip(jax.tree.leaves(x),
                                                                                       jax.tree.leaves(y)))

    first, final = jax.jit(jax.vmap(train))(jnp.array([1, 2]))
    first = jax.tree.map(lambda x: x[0], first)
    a, b = (jax.tree.map(lambda x, i=i: x[i], final) for i in (0, 1))
    moved = largest_difference(a, b)
    assert moved < 1e-5, f"{algo}: the dead agent's noise changed the parameters by up to {moved:.3g}"
    assert largest_difference(a, first) > 1e-4, f"{algo}: the updates changed nothing"   # it did learn
