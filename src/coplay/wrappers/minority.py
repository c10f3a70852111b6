"""One seat of a trained team taken over by an adversary: the team's other agents
(the victims) keep playing their frozen policy, and the adversary, the only agent of
the wrapped environment, is rewarded for lowering their return.

    env = Minority(coplay.make("spread"), team_policy, team_params, seat=2)
    # a one-agent environment: the adversary's observation is seat 2's, its reward
    # -mean_{i != 2} r_i each step; info["victims_reward"] is +mean_{i != 2} r_i

This is the black-box minority attack of adversarial minority influence (AMI, Li et
al., 2023): the adversary sees only its own seat's observation and acts only through
its own actions, and any coplay trainer learns it through the ordinary algorithm
contract (`coplay train ... minority=<run dir>[@seed]:seat=K[:influence=B]`). The
victims' policy runs inside the environment's step (compiled with it), each episode
starting from its initial carry; its randomness comes from the step's key.

`influence=B` adds AMI's reason to act: how much the adversary's action moves the
victims' policies. At each step the environment is also stepped, from the same state
with the same key, with each other action the adversary could have taken (every legal
one), and the victims' action distributions at each resulting observation are read
(`Policy.probs`). The influence is the counterfactual social influence of Jaques et al.
(2019), averaged over the victims v:

    I_t = mean_v KL( pi_v(. | o_v(a_t)) || mean_{a' legal} pi_v(. | o_v(a')) )

(the victims' next-step distribution after the action taken, against its mean over the
adversary's legal actions, uniformly weighted: the wrapper does not know the learner's
policy), 0 where the episode ends. `horizon=H` (`:horizon=H`) compares the victims'
policies H steps after the action instead of one, the seat holding its action and the
victims acting on the same keys in every branch: where an action reaches the others'
observations only a step later (spread moves an agent with its previous velocity, so
its action shows in the others' view after two steps) the one-step influence is zero.
The adversary's reward is then -mean_v r_v + B I_t;
info["influence"] is I_t (an episode's sum in a run's metrics, `influence`). This is
AMI's influence term in the form that needs no model of the victims beyond their
policy; AMI's own refinements (a filter that keeps the part of the influence the
adversary alone causes, and an oracle that aims it at the victims' worst actions) are
not reproduced. It needs a discrete-action adversary seat and a
victims' policy with a distribution (every PPO-family policy that samples; not one that
evaluates greedily).
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
from coplay.core.spaces import num_actions
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

    def __init__(self, env: Env, policy: Policy, params: Any, seat: int, influence: float = 0.0,
                 horizon: int = 1):
        super().__init__(env)
        n = env.spec.num_agents
        if isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < n:
            raise ConfigError(f"seat={seat!r}: {env.spec.name!r} has seats 0..{n - 1}")
        if n < 2:
            raise ConfigError(f"{env.spec.name!r} has one agent; a minority attack needs a team of at least two")
        if env.spec.reward_dim != 1:
            raise ConfigError(f"{env.spec.name!r} has {env.spec.reward_dim} objectives; the adversary lowers one "
                              "team return")
        if not influence >= 0.0:
            raise ConfigError(f"influence={influence!r}: the weight of the influence reward is 0 or more")
        if influence and not env.spec.discrete_actions:
            raise ConfigError(f"influence={influence}: the counterfactual actions of seat {seat} are every discrete "
                              f"action, and {env.spec.name!r} has continuous actions; use influence=0")
        if influence and policy.probs is None:
            raise ConfigError(f"influence={influence}: the victims' policy has no action distribution to measure (a "
                              "greedy or scripted policy); use influence=0, or a team that samples its actions")
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
            raise ConfigError(f"horizon={horizon!r}: the steps after the seat's action at which the victims' "
                              "policies are compared, 1 or more")
        self.policy, self.params, self.seat, self.influence = policy, params, seat, float(influence)
        self.horizon = horizon
        s = env.spec
        self.spec = dataclasses.replace(
            s, name=f"{s.name}/minority@{seat}", num_agents=1, teams=(0,), roles=("adversary",),
            reward_names=())
        self.victims = jnp.asarray([i != seat for i in range(n)])

    def _own(self, ts: TimeStep, reward: jax.Array, victims_reward: jax.Array,
             influence: jax.Array | None = None) -> TimeStep:
        one = lambda x: x[self.seat][None]  # noqa: E731
        info = {**ts.info, "victims_reward": victims_reward.astype(jnp.float32)}
        if self.influence:   # the same keys at reset and at every step
            info["influence"] = jnp.zeros((), jnp.float32) if influence is None else influence
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
        obs, now = self._read(state.inner, state.ts)
        joint, carry = self.policy.act(self.params, obs, now.action_mask, k_victims, state.carry, state.fresh[None])
        joint = joint[0].at[self.seat].set(actions[0].astype(joint.dtype))
        inner, ts = self.env.step(state.inner, joint, k_env)
        victims = self._victims_mean(ts.reward)
        if not self.influence:
            return MinorityState(inner, ts, carry, ts.done), self._own(ts, -victims, victims)
        influence = self._influence(state, joint, k_env, carry)
        return (MinorityState(inner, ts, carry, ts.done),
                self._own(ts, -victims + self.influence * influence, victims, influence))

    def _read(self, inner: Any, ts: TimeStep) -> tuple[jax.Array, TimeStep]:
        """What the victims' policy reads at time step `ts` of state `inner`, as a batch of one:
        its observations (`Policy.observe` where it has one) and the time step."""
        batch = jax.tree.map(lambda x: x[None], (inner, ts))
        return (batch[1].obs if self.policy.observe is None else self.policy.observe(*batch)), batch[1]

    def _victims_probs(self, inner: Any, ts: TimeStep, carry: Any) -> jax.Array:
        """`[N, A]`: the victims' policy at the time step `ts` of state `inner` (carry `carry`)."""
        assert self.policy.probs is not None
        obs, one = self._read(inner, ts)
        probs, _ = self.policy.probs(self.params, obs, one.action_mask, carry, one.done)
        return probs[0]

    def _influence(self, state: MinorityState, joint: jax.Array, key: jax.Array, carry: Any) -> jax.Array:
        """I_t of the module's doc: the victims' policies `horizon` steps after each action of
        the seat (the action held, the victims acting on the same keys in every branch), the
        branch of the action taken against their mean over the seat's legal actions."""
        num = num_actions(self.env.spec.action_space)
        legal = state.ts.action_mask[self.seat].astype(jnp.float32)                       # [A]
        taken_action = joint[self.seat]

        def branch(action: jax.Array) -> tuple[jax.Array, jax.Array]:
            held = action.astype(joint.dtype)
            b_inner, b_ts = self.env.step(state.inner, joint.at[self.seat].set(held), key)
            b_carry, ended = carry, b_ts.done
            for h in range(1, self.horizon):        # the victims act on; the seat repeats its action
                k_act, k_env = jax.random.split(jax.random.fold_in(key, h))
                obs, one = self._read(b_inner, b_ts)
                acts, b_carry = self.policy.act(self.params, obs, one.action_mask, k_act, b_carry, one.done)
                b_inner, b_ts = self.env.step(b_inner, acts[0].at[self.seat].set(held), k_env)
                ended = ended | b_ts.done
            return self._victims_probs(b_inner, b_ts, b_carry), ended

        every, ended = jax.vmap(branch)(jnp.arange(num))                                 # [A, N, A_v], [A]
        mean = jnp.einsum("a,anv->nv", legal, every) / jnp.maximum(legal.sum(), 1.0)
        taken = every[taken_action]     # with horizon 1, the step taken itself (same state, action and key)
        kl = jnp.sum(jnp.where(taken > 0, taken * (jnp.log(jnp.maximum(taken, 1e-30))
                                                   - jnp.log(jnp.maximum(mean, 1e-30))), 0.0), axis=-1)   # [N]
        kl = jnp.maximum(kl, 0.0)       # >= 0; rounding leaves tiny negatives where the policies barely move
        return jnp.where(ended[taken_action], 0.0, self._victims_mean(kl)).astype(jnp.float32)

    def base_state(self, state: MinorityState) -> Any:
        return self.env.base_state(state.inner)
