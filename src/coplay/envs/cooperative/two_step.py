"""The two-step cooperative game of Rashid et al. (2018, QMIX, section 6.1).

Two agents, two actions each (0 = A, 1 = B), two steps per episode, one common
reward. In the first state the reward is 0 and agent 0's action chooses the
next state: A leads to state 2A, B to state 2B (agent 1's action is ignored).
In 2A every joint action pays 7; in 2B the payoffs are [[0, 1], [1, 8]]. The
optimal return is 8 (agent 0 picks B, then both pick B); a value factorisation
that cannot condition its mixing on the state (VDN's sum) settles for 7, while
QMIX's state-conditioned mixing can represent the optimum (the paper's Table 1).

Observation of each agent and `global_state`: a one-hot of the state (1, 2A,
2B); both agents see it. info["optimal"] is 1 on the last step when the
episode's return is the optimal 8.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec, TimeStep

FIRST, STATE_2A, STATE_2B = range(3)
PAYOFF_2A = np.full((2, 2), 7.0, np.float32)
PAYOFF_2B = np.array([[0.0, 1.0], [1.0, 8.0]], np.float32)
NAMES = ("1", "2A", "2B")


@struct.dataclass
class TwoStepState:
    node: jax.Array   # [] int32: FIRST, STATE_2A or STATE_2B; 3 after the second step
    last: jax.Array   # [2] int32 previous joint action (-1 before the first)


class TwoStep(Env):
    def __init__(self):
        self.payoffs = jnp.stack([jnp.zeros((2, 2)), jnp.asarray(PAYOFF_2A), jnp.asarray(PAYOFF_2B)])  # [3, 2, 2]
        self.spec = EnvSpec(
            name="two_step", num_agents=2, obs_space=Box(0.0, 1.0, (3,)), action_space=Discrete(2),
            global_state_space=Box(0.0, 1.0, (3,)), max_steps=2, render_text=self.render_text,
        )

    def _observe(self, state: TwoStepState, reward, done, optimal) -> TimeStep:
        onehot = jax.nn.one_hot(state.node, 3, dtype=jnp.float32)   # node 3 (episode over) -> zeros
        return TimeStep(
            obs=jnp.stack([onehot, onehot]), reward=jnp.full((2,), reward, jnp.float32), done=done,
            truncated=jnp.zeros((), bool), active=jnp.ones(2, bool), action_mask=jnp.ones((2, 2), bool),
            global_state=onehot, info={"optimal": optimal.astype(jnp.int32)},
        )

    def _reset(self, key: jax.Array) -> tuple[TwoStepState, TimeStep]:
        state = TwoStepState(node=jnp.array(FIRST, jnp.int32), last=jnp.full((2,), -1, jnp.int32))
        return state, self._observe(state, 0.0, jnp.zeros((), bool), jnp.zeros((), bool))

    def _step(self, state: TwoStepState, actions: jax.Array, key: jax.Array) -> tuple[TwoStepState, TimeStep]:
        actions = jnp.clip(actions.astype(jnp.int32), 0, 1)
        node = jnp.minimum(state.node, STATE_2B)
        reward = self.payoffs[node, actions[0], actions[1]]
        first = state.node == FIRST
        next_node = jnp.where(first, jnp.where(actions[0] == 0, STATE_2A, STATE_2B), 3)
        done = ~first
        optimal = done & (node == STATE_2B) & (actions[0] == 1) & (actions[1] == 1)
        new = TwoStepState(node=next_node.astype(jnp.int32), last=actions)
        return new, self._observe(new, reward, done, optimal)

    def render_text(self, state: TwoStepState) -> str:
        node = int(state.node)
        where = "episode over" if node == 3 else f"state {NAMES[node]}"
        last = np.asarray(state.last)
        return f"two_step: {where}" + ("" if last[0] < 0 else f", last actions {last.tolist()}")
