"""One seat of a trained team taken over by an adversary: the team's other agents
(the victims) keep playing their frozen policy, and the adversary, the only agent of
the wrapped environment, is rewarded for lowering their return.

    env = Minority(coplay.make("spread"), team_policy, team_params, seat=2)
    # a one-agent environment: the adversary's observation is seat 2's, its reward
    # -mean_{i != 2} r_i each step; info["victims_reward"] is +mean_{i != 2} r_i

This is the black-box minority attack of adversarial minority influence (AMI, Li et
al., 2023) without its influence term: the adversary sees only its own seat's
observation and acts only through its own actions, and any coplay trainer learns it
through the ordinary algorithm contract (`coplay train ... minority=<run dir>[@seed]
:seat=K`). The victims' policy runs inside the environment's step (compiled with it),
each episode starting from its initial carry; its randomness comes from the step's key.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from coplay.core.env import Env, Wrapper
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.core.types import TimeStep


class MinorityState(struct.PyTreeNode):
    inner: Any
    ts: TimeStep          # the inner environment's time step, which the victims act on
    carry: Any            # the victims' policy carry, [1, ...]
    fresh: jax.Array      # the next step is the first of an episode


class Minority(Wrapper):
    """`env` with seat `seat` played by the one agent of this environment and every
    other seat by `policy` (with `params`, acting for all rows; `Policy.observe` is
    used where the policy reads the state). `policy` must act in `env` as it is."""

    def __init__(self, env: Env, policy: Policy, params: Any, seat: int):
        super().__init__(env)
        n = env.spec.num_agents
        if isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < n:
            raise ConfigError(f"seat={seat!r}: {env.spec.name!r} has seats 0..{n - 1}")
        if n < 2:
            raise ConfigError(f"{env.spec.name!r} has one agent; a minority attack needs a team of at least two")
        if env.spec.reward_dim != 1:
            raise ConfigError(f"{env.spec.name!r} has {env.spec.reward_dim} objectives; the adversary lowers one "
                              "team return")
        self.policy, self.params, self.seat = policy, params, seat
        s = env.spec
        self.spec = dataclasses.replace(
            s, name=f"{s.name}/minority@{seat}", num_agents=1, teams=(0,), roles=("adversary",),
            reward_names=())
        self.victims = jnp.asarray([i != seat for i in range(n)])

    def _own(self, ts: TimeStep, reward: jax.Array, victims_reward: jax.Array) -> TimeStep:
        one = lambda x: x[self.seat][None]  # noqa: E731
        info = {**ts.info, "victims_reward": victims_reward.astype(jnp.float32)}
        return dataclasses.replace(ts, obs=one(ts.obs), action_mask=one(ts.action_mask), active=one(ts.active),
                                   reward=reward.reshape(1).astype(jnp.float32), info=info)

    def _victims_mean(self, reward: jax.Array) -> jax.Array:
        return jnp.sum(jnp.where(self.victims, reward, 0.0)) / jnp.sum(self.victims)

    def _reset(self, key: jax.Array) -> tuple[MinorityState, TimeStep]:
        inner, ts = self.env.reset(key)
        state = MinorityState(inner, ts, self.policy.initial_carry((1,)), jnp.ones((), bool))
        return state, self._own(ts, jnp.zeros(()), jnp.zeros(()))

    def _step(self, state: MinorityState, actions: jax.Array, key: jax.Array) -> tuple[MinorityState, TimeStep]:
        k_victims, k_env = jax.random.split(key)
        batch = jax.tree.map(lambda x: x[None], (state.inner, state.ts))
        obs = batch[1].obs if self.policy.observe is None else self.policy.observe(*batch)
        joint, carry = self.policy.act(self.params, obs, batch[1].action_mask, k_victims, state.carry,
                                       state.fresh[None])
        joint = joint[0].at[self.seat].set(actions[0].astype(joint.dtype))
        inner, ts = self.env.step(state.inner, joint, k_env)
        victims = self._victims_mean(ts.reward)
        return MinorityState(inner, ts, carry, ts.done), self._own(ts, -victims, victims)

    def base_state(self, state: MinorityState) -> Any:
        return self.env.base_state(state.inner)
