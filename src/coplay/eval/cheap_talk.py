"""Adversarial (and cooperative) cheap talk, trained by evolution strategies over victims
that learn from scratch (Lu et al., "Adversarial Cheap Talk", ICML 2023).

    result = train_cheap_talk("spread", mode="adversarial", generations=30, population=16)
    result.fitness          # [generations]: the victims' mean return per generation
    score_speaker("spread", result.params, seeds=8)   # victims trained anew, hearing it

A speaker (`coplay.wrappers.cheap_talk.linear_speaker` of the global state) appends a
message to the victims' observations and does nothing else. Its fitness is the victims'
return at the end of their training *from scratch* with a coplay trainer (`algo`, IPPO by
default, through the algorithm contract) while hearing it: the mean episode return of
their last `tail` updates. `mode="adversarial"` lowers it, `"cooperative"` raises it.

One generation is one compiled program: the `population` speakers sampled by OpenAI-ES
(evosax's `Open_ES`, antithetic, centred-rank fitness), each with `victim_seeds` victim
runs of `victim_updates` updates, every run of the generation starting from the same
victims' initial parameters (common random numbers between the speakers; new ones each
generation). `victims_per_second` is victim runs trained per second of a generation.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos import get_algo
from coplay.algos.registry import check_env_support
from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.eval.stats import Estimate, summarize
from coplay.interop.extras import require
from coplay.nets.init import init_stacked
from coplay.wrappers.cheap_talk import CheapTalk, linear_speaker, linear_speaker_params

Mode = Literal["adversarial", "cooperative"]
MODES: tuple[str, ...] = ("adversarial", "cooperative")


@dataclass
class CheapTalkResult:
    params: Any                                   # the final mean speaker (linear_speaker's params)
    fitness: list[float] = field(default_factory=list)   # per generation: the population's mean victims' return
    seconds: list[float] = field(default_factory=list)   # per generation, after the first (which compiles)
    victims_per_second: float = float("nan")


def _victim_program(env: Any, algo: str, overrides: dict, victims: Sequence[int], message_dim: int,
                    updates: int, tail: int):
    """(speaker params, victims' initial state) -> the victims' mean return over their last `tail` updates."""
    entry = get_algo(algo)
    if entry.engine != "compiled" or entry.config is None:
        raise ConfigError(f"algo={algo!r} does not train compiled; the victims of cheap talk learn inside one "
                          "compiled program (ippo, mappo, ...)")
    try:
        config = entry.config(**overrides)
    except TypeError as e:
        raise ConfigError(f"algo={algo}: {e}") from e
    check_env_support(CheapTalk(env, linear_speaker, linear_speaker_params(env, message_dim), victims,
                                message_dim).spec, algo, entry.capabilities)

    def trainer_for(params: Any) -> Any:
        return entry.factory(config, CheapTalk(env, linear_speaker, params, victims, message_dim), updates)

    def run(params: Any, state: Any) -> jax.Array:
        trainer = trainer_for(params)

        def one(s, _):
            s, metrics = trainer.update(s)
            return s, metrics["return"]

        _, returns = jax.lax.scan(one, state, None, length=updates)
        last = returns[-tail:]
        return jnp.nanmean(last)

    return trainer_for, run


def train_cheap_talk(env: str | Any, *, mode: Mode = "adversarial", algo: str = "ippo",
                     overrides: dict | None = None, victims: Sequence[int] | None = None, message_dim: int = 2,
                     population: int = 16, generations: int = 20, victim_seeds: int = 2, victim_updates: int = 20,
                     tail: int = 5, sigma: float = 0.5, lr: float = 0.1, seed: int = 0,
                     verbose: bool = False) -> CheapTalkResult:
    """Train a speaker by OpenAI-ES (see the module's doc)."""
    require("evosax", "attacks", "coplay.eval.cheap_talk")
    import optax
    from evosax.algorithms import Open_ES

    if mode not in MODES:
        raise ConfigError(f"mode={mode!r} is not one of {', '.join(MODES)}")
    if population < 2 or population % 2:
        raise ConfigError(f"population={population} must be even and at least 2 (antithetic pairs)")
    if not 1 <= tail <= victim_updates:
        raise ConfigError(f"tail={tail} must be between 1 and victim_updates={victim_updates}")
    env = ENVS.make(env) if isinstance(env, str) else env
    victims = list(range(env.spec.num_agents)) if victims is None else list(victims)
    overrides = dict(overrides or {})
    trainer_for, run = _victim_program(env, algo, overrides, victims, message_dim, victim_updates, tail)
    zero = linear_speaker_params(env, message_dim)
    es = Open_ES(population, zero, optimizer=optax.adam(lr), std_schedule=optax.constant_schedule(sigma))
    es_params = es.default_params
    key = jax.random.PRNGKey(seed)
    key, k_init = jax.random.split(key)
    state = es.init(k_init, zero, es_params)
    sign = 1.0 if mode == "adversarial" else -1.0   # evosax minimises

    @jax.jit
    def generation(members: Any, victims_state: Any) -> jax.Array:
        """[population, victim_seeds]: each speaker's victims' return, each victims' run from the same start."""
        return jax.vmap(lambda p: jax.vmap(lambda s: run(p, s))(victims_state))(members)

    result = CheapTalkResult(zero)
    for g in range(generations):
        key, k_ask, k_victims, k_tell = jax.random.split(key, 4)
        members, state = es.ask(k_ask, state, es_params)
        initial = init_stacked(trainer_for(zero).init, jax.random.split(k_victims, victim_seeds))
        t = time.perf_counter()
        returns = np.asarray(generation(members, initial))
        seconds = time.perf_counter() - t
        mean = np.nanmean(returns, axis=1)
        fitness = np.where(np.isnan(mean), 1e6, sign * mean)   # victims that finished no episode: the worst
        state, _ = es.tell(k_tell, members, jnp.asarray(fitness, jnp.float32), state, es_params)
        result.fitness.append(float(np.nanmean(mean)))
        if g > 0:
            result.seconds.append(seconds)
        if verbose:
            print(f"generation {g}: victims' return {result.fitness[-1]:.3f} ({seconds:.1f} s)", flush=True)
    result.params = es.get_mean(state)
    if result.seconds:
        result.victims_per_second = population * victim_seeds / float(np.median(result.seconds))
    return result


def score_speaker(env: str | Any, params: Any | None, *, algo: str = "ippo", overrides: dict | None = None,
                  victims: Sequence[int] | None = None, message_dim: int = 2, seeds: int = 8,
                  victim_updates: int = 20, tail: int = 5, seed: int = 1_000) -> tuple[Estimate, np.ndarray]:
    """Victims trained from scratch with `seeds` fresh seeds hearing speaker `params` (None:
    the silent speaker, every message 0): their mean return over the last `tail` updates,
    IQM with its 95% bootstrap interval, and the per-seed values."""
    env = ENVS.make(env) if isinstance(env, str) else env
    victims = list(range(env.spec.num_agents)) if victims is None else list(victims)
    zero = linear_speaker_params(env, message_dim)
    params = zero if params is None else params
    trainer_for, run = _victim_program(env, algo, dict(overrides or {}), victims, message_dim, victim_updates, tail)
    initial = init_stacked(trainer_for(zero).init, jax.random.split(jax.random.PRNGKey(seed), seeds))
    values = np.asarray(jax.jit(jax.vmap(lambda s: run(params, s)))(initial))
    return summarize(values), values


def random_speaker(env: str | Any, message_dim: int = 2, scale: float = 0.5, seed: int = 0) -> Any:
    """A speaker with Gaussian parameters of standard deviation `scale` (the ES's own spread)."""
    env = ENVS.make(env) if isinstance(env, str) else env
    zero = linear_speaker_params(env, message_dim)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(zero))
    return {k: scale * jax.random.normal(kk, v.shape) for (k, v), kk in zip(sorted(zero.items()), keys)}


__all__ = ["MODES", "CheapTalkResult", "random_speaker", "score_speaker", "train_cheap_talk"]
