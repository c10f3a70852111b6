"""PSRO with best responses trained by PPO: population learning for games without
an exact tree (Lanctot et al., 2017).

    result = psro_ppo.run(coplay.make("connect_four"), psro_ppo.Config(iterations=6), key)
    result.br_value            # [iterations] what each new response earns against the mixture it answered
    result.meta_strategy       # [K] the final mixture over the population

The population starts from the uniform random policy (an actor network with
zero weights). Every iteration:

1. the empirical meta-game: every pair of members plays `meta_games` games in
   each seating (compiled matches, `coplay.algos.common.matches`);
   `payoffs[i, j]` is member i's mean return against member j over both seats,
2. a meta-solver (`nash`, `replicator`, `uniform`;
   `coplay.algos.common.meta_solvers`) picks a mixture over the population,
3. a fresh self-play PPO learner is trained against that mixture (each game
   draws its opponent from the population with the mixture's weights, the
   learner in a random seat: `selfplay_ppo.response_trainer`) and joins the
   population.

Seats are drawn at random in every game, so the game is symmetric and one
population serves both seats; the meta-game is antisymmetric and its
equilibrium mixture is played in every seat. The games must be two-player and
zero-sum, like the meta-solvers.

The response trained at iteration t is an approximate best response to mixture
t, so `br_value[t]` (its mean return against that mixture over both seats,
read from the meta-game) estimates the mixture's exploitability from below,
the field's usual "approximate exploitability". On games played from an exact
tree (`tree:kuhn_poker`, `tree:leduc_holdem`) every member is also read back
as a table over information sets and the mixture's exact exploitability is
reported (`exact_exploitability`).

Members play their stochastic policies. Populations are preallocated to
`iterations + 1` members, so the response trainer and the matches compile
once; unused members carry zero weight.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos import psro, selfplay_ppo
from coplay.algos.base import Policy
from coplay.algos.common import opponent_pool
from coplay.algos.common.matches import bare_env, make_match
from coplay.algos.common.meta_solvers import META_SOLVERS, solve_meta_game
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.envs.trees import TreeArrays
from coplay.envs.trees.env import TreeGameEnv
from coplay.envs.trees.values import exploitability


def _response_defaults() -> selfplay_ppo.Config:
    # A best response should commit: a small entropy bonus, and no random opening moves
    # (against a fixed mixture every position it meets is already one the mixture reaches).
    return selfplay_ppo.Config(ent_coef=0.01, random_opening=0)


@dataclass(frozen=True)
class Config:
    meta_solver: str = "nash"
    iterations: int = 8
    br_updates: int = 100
    meta_games: int = 2000
    ppo: selfplay_ppo.Config = field(default_factory=_response_defaults)

    def __post_init__(self) -> None:
        if self.meta_solver not in META_SOLVERS:
            raise ConfigError(f"psro_ppo meta_solver {self.meta_solver!r} is not one of {', '.join(META_SOLVERS)}")
        for name in ("iterations", "br_updates", "meta_games"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"psro_ppo {name}={value!r} must be an integer >= 1")
        if not isinstance(self.ppo, selfplay_ppo.Config):
            raise ConfigError(f"psro_ppo ppo must be a selfplay_ppo.Config, got {type(self.ppo).__name__}")


@dataclass(frozen=True)
class Result:
    population: Any                  # actor params, every leaf stacked [K, ...]; member 0 is uniform play
    meta_strategy: np.ndarray        # [K] the final meta-game's mixture
    meta_strategies: list[np.ndarray]  # the mixture each iteration's response answered
    payoffs: np.ndarray              # [K, K] member i's mean return against member j, both seats
    br_value: np.ndarray             # [iterations] each response's return against the mixture it answered
    exact_exploitability: np.ndarray | None  # [iterations + 1] mixtures 0..T, games with an exact tree only
    policy: Policy                   # how every member plays (stochastic), for matches and tournaments

    def member(self, i: int) -> Any:
        """Member i's actor params."""
        return jax.tree.map(lambda x: x[i], self.population)


def run(env: Env, config: Config = Config(), key: jax.Array | None = None,
        log: Callable[[dict], None] | None = None) -> Result:
    """PSRO on two-player zero-sum game `env`; `log` (if given) receives each iteration's figures."""
    spec = bare_env(env).spec
    if spec.num_agents != 2:
        raise ConfigError(f"psro_ppo plays two-player zero-sum games; {spec.name!r} has {spec.num_agents} players")
    key = jax.random.PRNGKey(0) if key is None else key
    k_init, k_loop = jax.random.split(key)
    cap = config.iterations + 1

    stochastic = dataclasses.replace(config.ppo, greedy_eval=False)
    probe = selfplay_ppo.SelfPlayPPO(stochastic, env, 1)
    uniform = jax.tree.map(jnp.zeros_like, probe.policy_params(probe.init(k_init)))
    population = jax.tree.map(lambda x: jnp.broadcast_to(x, (cap, *x.shape)), uniform)
    policy = probe.policy()

    train = selfplay_ppo.response_trainer(config.ppo, env, config.br_updates,
                                          opponent_pool.from_population(population, jnp.ones(cap)))
    match = make_match(env, [policy, policy], config.meta_games)
    seat0_return = lambda a, b, k: jnp.mean(match([a, b], k)["return"][:, 0])  # noqa: E731
    # The new member against every member, seated first and then second: seat 0's mean return.
    as_first = jax.jit(jax.vmap(seat0_return, in_axes=(None, 0, None)))
    as_second = jax.jit(jax.vmap(lambda a, b, k: seat0_return(b, a, k), in_axes=(None, 0, None)))
    exact = _exact_scorer(env, probe)

    r0 = np.zeros((cap, cap))  # r0[i, j]: seat 0's mean return with member i in seat 0, member j in seat 1

    def admit(k: int, params: Any, key: jax.Array) -> None:
        nonlocal population
        population = jax.tree.map(lambda s, p: s.at[k].set(p), population, params)
        k1, k2 = jax.random.split(key)
        r0[k, :] = np.asarray(as_first(params, population, k1))
        r0[:, k] = np.asarray(as_second(params, population, k2))

    def payoffs(count: int) -> np.ndarray:
        return ((r0 - r0.T) / 2.0)[:count, :count]

    def weights(mixture: np.ndarray) -> jax.Array:
        return jnp.zeros(cap, jnp.float32).at[: mixture.size].set(jnp.asarray(mixture, jnp.float32))

    keys = jax.random.split(k_loop, 2 * config.iterations + 1)
    admit(0, uniform, keys[0])
    mixtures, br_values, exact_curve = [], [], []
    for t in range(config.iterations):
        count = t + 1
        mixture, _ = solve_meta_game(payoffs(count), config.meta_solver)
        mixtures.append(mixture)
        if exact is not None:
            exact_curve.append(exact(population, weights(mixture)))
        pool = opponent_pool.from_population(population, weights(mixture))
        response, metrics = train(pool, keys[2 * t + 1])
        admit(count, response, keys[2 * t + 2])
        br_values.append(float(payoffs(count + 1)[count, :count] @ mixture))
        if log is not None:
            row = {"iteration": t, "population": count, "br_value": br_values[-1],
                   "br_train_win": float(np.nanmean(np.asarray(metrics["win"])[-10:]))}
            if exact is not None:
                row["exact_exploitability"] = exact_curve[-1]
            log(row)

    final, _ = solve_meta_game(payoffs(cap), config.meta_solver)
    if exact is not None:
        exact_curve.append(exact(population, weights(final)))
    return Result(
        population=population, meta_strategy=final, meta_strategies=mixtures, payoffs=payoffs(cap),
        br_value=np.asarray(br_values), exact_exploitability=np.asarray(exact_curve) if exact is not None else None,
        policy=policy,
    )


def _exact_scorer(env: Env, trainer: selfplay_ppo.SelfPlayPPO):
    """`score(population, weights) -> exploitability` of the mixture, for games with an exact tree."""
    game = bare_env(env)
    if not isinstance(game, TreeGameEnv):
        return None
    t = TreeArrays.from_tree(game.tree)
    obs, mask, owner = game.infoset_views()
    rows = jnp.arange(owner.shape[0])

    @jax.jit
    def score(population, w):
        # Each member as a table [I, A] over information sets, then the mixture as one behaviour policy.
        tables = jax.vmap(lambda p: trainer.action_probs(p, obs, mask)[rows, owner])(population)
        mix = psro.joint(t, psro.mixture_policy(t, tables, w, 0), psro.mixture_policy(t, tables, w, 1))
        return exploitability(t, mix)

    return lambda population, w: float(score(population, w))
