"""Multi-objective PPO by a weight sweep: a whole Pareto front from one compiled run.

Each preference weight w (a point of the simplex over the K objectives) trains its
own MAPPO policy (`coplay.algos.mappo`; IPPO's critic with `algo.critic=local`) on
the linear utility of the vector reward,

    r_t = w . r_t^vec,   so that the return is w . R^vec,

the scalarisation of MOMAland's MOMAPPO and of CrazyRL's MOMAPPO (Felten et al.,
2024). The W weights (`algo.weights`, spread evenly over the simplex) are one more
vmapped axis beside the seeds: the TrainState stacks every weight's MAPPO state
`[W, ...]`, and `update` steps them all at once, so W weights x S seeds train in
one compiled program. `total_steps` counts environment steps per weight (each
policy sees that many), so a run of W weights steps W times as many environments
as a run of one policy.

Evaluation plays each weight's policy and reports its vector return, each
objective averaged over agents (`w<i>/objective/<name>`); `front` turns those
into the seed's set of vector returns, whose hypervolume and expected utility
the experiment layer reports. A linear utility reaches only the points of the
front's convex hull: a point in a concave part of the front is best for no
weight (Das and Dennis, 1997), so the learned front can fall short of the true
one there; `Scalarise(method="chebyshev")` reaches such points for one weight.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.algos import mappo
from coplay.algos.base import Capabilities, Fronts, Health, Trainer
from coplay.algos.common import ols
from coplay.algos.common.evaluation import make_evaluator
from coplay.algos.common.preferences import (
    check_show_weight,
    linear_utility,
    per_weight_results,
    read_front,
    spread_weights,
)
from coplay.algos.common.rollout import Transition
from coplay.core.config import number_list, param, parse_numbers
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Evaluator, Policy
from coplay.core.types import TimeStep
from coplay.wrappers import Accrued, Objectives, chebyshev
from coplay.wrappers.scalarise import check_utopia, named_reference_point, true_front

UTILITY_RETURN = ("episode utility under each policy's own weight (w . R, or algo.utility=chebyshev's), averaged "
                  "over agents and weights (undiscounted)")
UTILITIES = ("linear", "chebyshev")


@dataclass(frozen=True)
class LaneConfig(mappo.Config):
    """What every MAPPO policy of a vector reward has: the weight sweep's (`Config`) and the
    preference-conditioned one's (`coplay.algos.pc_mappo.Config`)."""

    # The front is one of undiscounted episode returns, and a short horizon's discount
    # would weigh time as one more objective: a longer horizon than MAPPO's default.
    gamma: float = param(0.99, "discount", min=0.0, max=1.0)
    critic: str = param("global", "each policy's critic: global (MAPPO, the global state) or local (IPPO, the "
                                   "agent's own observation)", choices=("global", "local"))
    show_weight: int = param(0, "the weight (an index into the weights) whose policy `coplay eval` and `record` "
                                "play", min=0, affects_results=False)


@dataclass(frozen=True)
class Config(LaneConfig):
    weights: int = param(16, "preference weights trained side by side, spread evenly over the simplex of the "
                             "objectives (3 objectives: 3, 6, 10, 15, 21, ...)", min=2)
    select: str = param("even", "how the weights are chosen: even (spread evenly, fixed), or ols (two objectives: "
                                "after each evaluation, policies that add nothing to the front move to the corner "
                                "weights where it can still improve most, by optimistic linear support)",
                        choices=("even", "ols"))
    utility: str = param("linear", "what each policy maximises: linear (w . R, the return's weighted sum; it reaches "
                                   "the front's convex hull only) or chebyshev (-max_k w_k |z_k - R_k| / (z_k - r_k) "
                                   "of the episode's return R, utopia z, reference point r: every Pareto-optimal "
                                   "point, concave parts included)", choices=UTILITIES)
    utopia: str | None = param(None, "chebyshev's utopia point z, one number per objective (e.g. 16:-1), better "
                                     "than every return; default: the environment's true front's best in each "
                                     "objective, plus 1% of its distance from the reference point",
                               rule=number_list)


@struct.dataclass
class TrainState:
    """No field is `per_env`: the environments are the second axis of the lanes, under the
    weights, so several devices split a run's seeds, not its environments."""

    lanes: mappo.TrainState   # every weight's MAPPO state, stacked [W, ...]
    weights: jax.Array        # [W, K] the preference each lane trains for


class Lane(mappo.MAPPO):
    """MAPPO on a vector reward, with MAPPO's or IPPO's critic (`algo.critic`): the weight
    sweep's policy for one weight (`learn` is given the weight's utility), and the base of
    the preference-conditioned MAPPO (`coplay.algos.pc_mappo`)."""

    name = "mo_ppo"
    config_class = LaneConfig
    capabilities = Capabilities(continuous_actions=True, recurrent=True, vector_reward=True, needs_vector_reward=True)

    def __init__(self, config: LaneConfig, env: Env, num_updates: int):
        self.local_critic = config.critic == "local"     # read by `critic_torso` as MAPPO builds its critic
        super().__init__(config, env, num_updates)
        check_show_weight(config)

    def critic_torso(self) -> str:
        return self.torso if self.local_critic else super().critic_torso()

    def critic_input(self, ts: TimeStep) -> jax.Array:
        if self.local_critic:   # IPPO's: each agent's own observation (flattened by the MLP)
            return ts.obs
        return super().critic_input(ts)


class MOPPO(Trainer[Config]):
    """W MAPPO policies, one per preference weight, for one seed; `update` is pure."""

    name = "mo_ppo"
    config_class = Config
    capabilities = Lane.capabilities
    return_convention = UTILITY_RETURN

    def __init__(self, config: Config, env: Env, num_updates: int):
        super().__init__(config, env, num_updates)          # refuses a scalar reward, naming who takes it
        self.objective_names = env.spec.objective_names
        if config.select == "ols" and env.spec.reward_dim != 2:
            raise ConfigError(f"algo.select=ols chooses weights for two objectives; {env.spec.name!r} has "
                              f"{env.spec.reward_dim} ({', '.join(self.objective_names)}): use algo.select=even")
        if config.utility != "chebyshev" and config.utopia is not None:
            raise ConfigError(f"algo.utopia={config.utopia} is read only with algo.utility=chebyshev")
        self.chebyshev = None
        if config.utility == "chebyshev":
            if config.select == "ols":
                raise ConfigError("algo.select=ols finds the corner weights of linear utilities; with "
                                  "algo.utility=chebyshev use algo.select=even")
            self.chebyshev = chebyshev_point(env, config.utopia)
        self.lane = Lane(config, Accrued(Objectives(env)) if self.chebyshev else Objectives(env), num_updates)
        self.env = self.lane.env
        self.preferences = spread_weights(env.spec.reward_dim, config.weights)     # [W, K] the starting weights
        moving = config.select == "ols"
        self.fronts = Fronts(self.preferences, self.front, self.after_evaluation if moving else None, self.weights_of)

    def utility(self, vector_return: jax.Array, weights: jax.Array) -> jax.Array:
        """`[..., K]` returns, `[..., K]` weights -> `[...]`: the utility each policy maximises."""
        if self.chebyshev is None:
            return linear_utility(vector_return, weights)
        utopia, scale = self.chebyshev
        return chebyshev(weights, utopia, vector_return, scale)

    def lane_reward(self, traj: Transition, w: jax.Array) -> jax.Array:
        """`[T, E, N]`: the rewards weight `w`'s policy learns from: w . r, or the change
        each step makes to the Chebyshev utility of the episode's return."""
        if self.chebyshev is None:
            return traj.reward @ w
        before = traj.info["accrued"]
        return self.utility(before + traj.reward, w) - self.utility(before, w)

    def health(self) -> Health:
        return self.lane.health()

    # ----- every weight's state, stacked -----------------------------------------------------
    def init(self, key: jax.Array) -> TrainState:
        lanes = jax.lax.map(self.lane.init, jax.random.split(key, self.config.weights))
        return TrainState(lanes=lanes, weights=jnp.asarray(self.preferences, jnp.float32))

    def update(self, state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        def lane(lane_state: mappo.TrainState, w: jax.Array):
            return self.lane.learn(lane_state, lambda traj: self.lane_reward(traj, w))

        lanes, metrics = jax.vmap(lane)(state.lanes, state.weights)      # each metric [W]
        mean_return = jnp.stack([metrics[f"objective/{name}"] for name in self.objective_names], -1)   # [W, K]
        metrics = {k: jnp.nanmean(v) for k, v in metrics.items() if k != "return_sum"}
        # each policy's utility of its mean return: not the mean of the objectives that MAPPO's return would be
        metrics["return"] = jnp.nanmean(self.utility(mean_return, state.weights))
        return TrainState(lanes=lanes, weights=state.weights), metrics

    # ----- acting and evaluation ---------------------------------------------------------------
    def policy(self) -> Policy:
        """The policy of weight `algo.show_weight`, taking every weight's parameters."""
        lane, i = self.lane.policy(), self.config.show_weight
        return dataclasses.replace(lane, act=lambda params, *rest: lane.act(
            jax.tree.map(lambda p: p[i], params["lanes"]), *rest))

    def policy_params(self, state: TrainState) -> Any:
        """Every weight's actor `[W, ...]` and the weights `[W, K]` (which `algo.select=ols` moves)."""
        return {"lanes": self.lane.policy_params(state.lanes), "weights": state.weights}

    def weights_of(self, state: TrainState) -> np.ndarray:
        return np.asarray(state.weights)

    def after_evaluation(self, state: TrainState, front: np.ndarray) -> TrainState:
        """With `algo.select=ols`, each seed's policies that add nothing to its front move to
        the corner weights where it can still improve most, each starting from the policy
        best there (`coplay.algos.common.ols.reselect`). The state is every seed's, `[S, ...]`."""
        weights = np.asarray(state.weights, np.float64)                                  # [S, W, K]
        chosen = [ols.reselect(points, w) for points, w in zip(front, weights)]
        source = np.stack([src for _, src in chosen])                                     # [S, W]
        if np.all(source == np.arange(source.shape[1])):
            return state
        seeds = np.arange(source.shape[0])[:, None]
        lanes = jax.tree.map(lambda x: x[seeds, source], state.lanes)
        moved = jnp.asarray(source != np.arange(source.shape[1]))
        # a moved policy's own random stream, not its source's
        folded = jax.vmap(jax.vmap(jax.random.fold_in))(lanes.key, jnp.broadcast_to(
            jnp.arange(source.shape[1], dtype=jnp.uint32), source.shape))
        lanes = lanes.replace(key=jnp.where(moved.reshape(moved.shape + (1,) * (lanes.key.ndim - 2)), folded,
                                            lanes.key))
        return TrainState(lanes=lanes, weights=jnp.asarray(np.stack([w for w, _ in chosen]), state.weights.dtype))

    def evaluator(self, episodes: int) -> Evaluator:
        """Every weight's policy plays `episodes` episodes: its
        return in each objective (`w<i>/objective/<name>`), and `return`, each
        policy's utility under its own weight averaged over the weights."""
        play = make_evaluator(self.lane.policy(), episodes)
        count = self.config.weights

        def evaluate(params: Any, key: jax.Array) -> dict[str, jax.Array]:
            # a key per weight: a host-stepped environment's episodes cannot be shared by the weights
            out = jax.vmap(play)(params["lanes"], jax.random.split(key, count))   # each [W, episodes]
            return per_weight_results(out, params["weights"], self.objective_names, self.utility)

        return evaluate

    def front(self, results: Mapping[str, np.ndarray]) -> np.ndarray:
        """`[S, W, K]`: each seed's mean vector return of every weight's policy."""
        return read_front(results, self.config.weights, self.objective_names)


def chebyshev_point(env: Env, utopia: str | None) -> tuple[jax.Array, jax.Array]:
    """Chebyshev's utopia point z `[K]` (given, or just beyond the best of each objective
    on the environment's true front) and each objective's scale z - r `[K]` (r the
    environment's reference point; 1 where it names none); refused before anything
    compiles where there is no utopia point to take, or it is not better than the front."""
    names, k = env.spec.objective_names, env.spec.reward_dim
    reference = named_reference_point(env)
    truth = true_front(env)
    if utopia is None:
        if truth is None or reference is None:
            raise ConfigError(f"algo.utility=chebyshev needs a utopia point, and {env.spec.name!r} computes no true "
                              f"front to take it from: give algo.utopia=... ({k} numbers separated by ':', one per "
                              f"objective: {', '.join(names)}), better than every episode return")
        best = truth.max(0)
        z = best + 0.01 * (best - reference)
    else:
        z = np.asarray(parse_numbers(utopia), np.float64)
        if z.shape != (k,) or not np.all(np.isfinite(z)):
            raise ConfigError(f"algo.utopia={utopia} must be {k} finite numbers, one per objective: {', '.join(names)}")
        check_utopia(env, z, f"algo.utopia={utopia}")
    scale = np.ones(k) if reference is None else z - reference
    if np.any(scale <= 0):
        raise ConfigError(f"chebyshev's utopia point {z.tolist()} must be better than the reference point "
                          f"{reference.tolist() if reference is not None else None} of {env.spec.name!r} in every "
                          f"objective ({', '.join(names)})")
    return jnp.asarray(z, jnp.float32), jnp.asarray(scale, jnp.float32)
