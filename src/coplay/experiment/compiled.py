"""The compiled engine: a `Trainer`'s run, many seeds in one compiled program,
chunked so that logging, evaluation and checkpoints happen between chunks.

    chunk = jit(vmap(scan(update, length=updates_per_chunk)))   # over seeds

The TrainState holds everything the run needs (parameters, optimiser state,
environment states, RNG keys), so a checkpoint at a chunk boundary resumes the
run exactly."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from coplay.algos import get_algo
from coplay.algos.base import Trainer
from coplay.algos.common.evaluation import make_evaluator
from coplay.algos.registry import check_env_support
from coplay.core.compile import jit, jit_once
from coplay.core.config import parse_numbers
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.core.registry import ENVS
from coplay.experiment import fronts, memory, warm_start
from coplay.experiment.config import Experiment, parse_minority, seeds_named
from coplay.experiment.evaluate import record_dialogue, record_episode
from coplay.experiment.headline import Headline, compiled_baseline
from coplay.experiment.loop import Engine, Evaluation, Schedule, chunk_schedule, evaluates_after, latest_checkpoint
from coplay.nets.init import init_stacked
from coplay.scale.devices import describe, run_mesh, shard_state, state_placement
from coplay.wrappers import Scalarise
from coplay.wrappers.episode_stats import is_info_entry
from coplay.wrappers.minority import Minority
from coplay.wrappers.social import parse_preference, social_preference


@dataclass
class Plan:
    """Everything derived from an Experiment before any compilation."""

    exp: Experiment
    env: Env
    trainer: Trainer
    schedule: Schedule
    reference: np.ndarray | None = None   # several objectives: the point each front's hypervolume is taken from

    @property
    def updates_per_chunk(self) -> int:
        return self.schedule.updates_per_chunk

    @property
    def num_chunks(self) -> int:
        return self.schedule.num_chunks

    @property
    def ragged(self) -> bool:
        """Whether the last chunk holds fewer updates than the others."""
        return self.schedule.num_updates % self.schedule.updates_per_chunk != 0

    @property
    def steps_per_chunk(self) -> int:
        return self.updates_per_chunk * self.trainer.steps_per_update


def make_env(exp: Experiment) -> Env:
    """The run's environment, scalarised, given a social preference, and with one seat of a
    trained team handed to the learner (`minority=`) where the run says so (refused before
    it is built where the run's scalarisation fields do not fit together; a preference is
    refused where the learner would not train on it)."""
    run = exp.run
    if run.scalarise is None and (run.preference is not None or run.utopia is not None):
        raise ConfigError("preference and utopia are read only when scalarising: add scalarise=linear or "
                          "scalarise=chebyshev")
    if run.scalarise is not None and not run.preference:
        raise ConfigError(f"scalarise={run.scalarise} needs the weights of the objectives: preference=0.7:0.3 "
                          "(one number per objective)")
    env = ENVS.make(exp.env, **exp.env_config)
    if run.scalarise is not None and run.preference:
        try:
            env = Scalarise(env, parse_numbers(run.preference), method=run.scalarise,
                            utopia=None if run.utopia is None else parse_numbers(run.utopia))
        except ConfigError as e:
            env.close()
            raise ConfigError(f"scalarise={run.scalarise} preference={run.preference}"
                              + ("" if run.utopia is None else f" utopia={run.utopia}") + f": {e}") from None
    if run.social is not None:
        name, _ = parse_preference(run.social)
        shaped = getattr(exp.algo_config, "shaped_reward", None)
        if shaped is None:
            env.close()
            raise ConfigError(f"social={run.social} is a reward the learner trains on through algo.shaped_reward, "
                              f"which algo={exp.algo} does not have; the PPO family has it (ippo, mappo)")
        if shaped != f"shaping/{name}":
            env.close()
            raise ConfigError(f"social={run.social} reports the preference as info['shaping/{name}']; train on it "
                              f"with algo.shaped_reward=shaping/{name} (now {shaped!r})")
        try:
            env = social_preference(env, run.social)
        except ConfigError as e:
            env.close()
            raise ConfigError(f"social={run.social}: {e}") from None
    if run.minority is not None:
        try:
            env = minority_env(env, exp)
        except BaseException:
            env.close()
            raise
    return env


def minority_env(env: Env, exp: Experiment) -> Env:
    """`env` with one seat of the trained team `minority=` names taken over by the learner
    (the team's newest checkpoint, restored by a `CompiledEngine` of its own config)."""
    from coplay.algos.common.matches import seated

    assert exp.run.minority is not None
    path, seed, seat, influence, horizon = parse_minority(exp.run.minority)
    config = Path(path) / "config.yaml"
    if not config.exists():
        raise ConfigError(f"minority={exp.run.minority}: {path!r} is not a run directory (no config.yaml)")
    team_exp = Experiment.load(config)
    if (team_exp.env, team_exp.env_config) != (exp.env, exp.env_config):
        raise ConfigError(f"minority={exp.run.minority}: that team was trained on env={team_exp.env} "
                          f"{team_exp.env_config}, this run is on env={exp.env} {exp.env_config}; the adversary "
                          "takes a seat in the team's own environment")
    if get_algo(team_exp.algo).engine != "compiled":
        raise ConfigError(f"minority={exp.run.minority}: that team was trained by algo={team_exp.algo} on the host; "
                          "a minority attack plays a compiled team")
    chosen = seeds_named(seed, team_exp.run.seeds, f"minority={exp.run.minority}")[0]
    team = CompiledEngine(team_exp)
    try:
        team.restore(Path(path) / "checkpoints")
        params = jax.tree.map(lambda x: x[chosen], team.policy_params())
        policy = team.policy()
    finally:
        team.close()
    return Minority(env, seated(policy, env), params, seat, influence, horizon)


def plan(exp: Experiment) -> Plan:
    """Validate the config, build the environment and trainer; nothing is compiled."""
    exp.validate()
    run = exp.run
    if run.init_params is not None and run.init_from is None:
        raise ConfigError(f"init_params={run.init_params} is read only with init_from=<run directory>")
    entry = get_algo(exp.algo)
    env = make_env(exp)
    try:
        if entry.engine != "compiled":
            check_env_support(env.spec, exp.algo, entry.capabilities)   # an unfit pair: the algorithms that can
            raise ConfigError(f"algo={exp.algo} trains on the host ({entry.engine} engine): `coplay train` runs it, "
                              f"and `coplay eval` and `coplay tournament` take its runs; sweeps of compiled "
                              f"seeds and datasets (`coplay record`) take compiled trainers only")
        schedule = chunk_schedule(exp, env.spec)
        trainer = entry.factory(exp.algo_config, env, num_updates=schedule.num_updates)
        if trainer.fronts is None and run.reference_point is not None:
            raise ConfigError(f"reference_point={run.reference_point} is read only by the trainers of several "
                              "objectives, which score fronts (mo_ppo)")
        reference = None if trainer.fronts is None else fronts.reference_point(
            env, None if run.reference_point is None else parse_numbers(run.reference_point))   # refused now if none
    except BaseException:
        env.close()
        raise
    return Plan(exp, env, trainer, schedule, reference)


def seed_keys(exp: Experiment) -> jax.Array:
    return jax.random.split(jax.random.PRNGKey(exp.run.seed), exp.run.seeds)


def init_state(p: Plan) -> Any:
    """Initial TrainState for every seed, stacked (each seed initialised outside vmap).
    No leaf is weakly typed (as a library's `jnp.array(0)` would be): a checkpoint
    restores strong types, and a resumed run then reuses the fresh run's compiled chunk."""
    state = init_stacked(p.trainer.init, seed_keys(p.exp), top_level=True)
    return jax.tree.map(lambda x: jax.numpy.asarray(x, x.dtype), state)


def place(p: Plan, state: Any) -> Any:
    """The stacked state spread over the visible devices: seeds, then each seed's environments."""
    return shard_state(state, run_mesh(p.exp.run.seeds, p.trainer.num_envs))


# A run of at most this many updates in all (a smoke test, a first try of a config) spends
# its time compiling, not training: its chunk compiles as a program that runs a few times
# (`coplay.core.compile`), about twice as fast.
FEW_UPDATES = 24


def chunk_function(p: Plan, placed: Any = None):
    """`chunk(state) -> (state, metrics)`: `updates_per_chunk` updates of every seed,
    compiled; the state's leaves are `[S, ...]` and the metrics `[S, updates]`. Where the
    last chunk is shorter (`p.ragged`), `chunk(state, active)` runs the first `active`
    updates and passes the state through the rest (one program for every chunk; the
    metrics of the updates not run are zeros).

    `placed`: the state as `place` spread it over several devices; the chunk then
    hands its state back placed the same way, so that the next chunk's input matches
    the first's and the program compiles once (left to XLA, the output's placement
    can differ from the input's in form, and every later call compiled again)."""
    trainer = p.trainer
    placement = state_placement(placed)
    pin: dict[str, Any] = {} if placement is None else {"out_shardings": (placement, None)}

    def one_seed(state, *active):
        if not active:
            return jax.lax.scan(lambda s, _: trainer.update(s), state, None, length=p.updates_per_chunk)
        metrics = jax.eval_shape(trainer.update, state)[1]

        def skip(s):
            return s, jax.tree.map(lambda m: jax.numpy.zeros(m.shape, m.dtype), metrics)

        def step(s, i):
            return jax.lax.cond(i < active[0], trainer.update, skip, s)

        return jax.lax.scan(step, state, jax.numpy.arange(p.updates_per_chunk))

    once = p.schedule.num_updates <= FEW_UPDATES
    if p.exp.run.seeds == 1:  # no vmap over a seed axis of size 1: batching costs time in every op
        def only_seed(state, *active):
            out = one_seed(jax.tree.map(lambda x: x[0], state), *active)
            return jax.tree.map(lambda x: x[None], out)

        return jit(only_seed, once=once, donate_argnums=0, **pin)
    return jit(jax.vmap(one_seed, in_axes=(0, None) if p.ragged else 0), once=once, donate_argnums=0, **pin)


# A run that evaluates at most this many times, or plays at most this many evaluation
# episodes per seed in all, compiles its evaluator as a program that runs once
# (`coplay.core.compile`): it compiles about twice as fast and runs slower.
FEW_EVALUATIONS = 3
FEW_EVALUATION_EPISODES = 256


def evaluation_function(p: Plan):
    """`evaluate(params [S, ...], keys [S, 2]) -> dict of [S, episodes]`, compiled for
    the evaluations the whole run makes (a resumed run compiles the program its first
    part did, which the compilation cache may already hold)."""
    evaluations = sum(evaluates_after(p.exp, p.num_chunks, c) for c in range(p.num_chunks))
    few = evaluations <= FEW_EVALUATIONS or evaluations * p.exp.run.eval_episodes <= FEW_EVALUATION_EPISODES
    return jit(jax.vmap(p.trainer.evaluator(p.exp.run.eval_episodes)), once=few)


def eval_keys(exp: Experiment, chunk: int) -> jax.Array:
    base = jax.random.fold_in(jax.random.PRNGKey(exp.run.seed), 1_000_003 + chunk)
    return jax.random.split(base, exp.run.seeds)


def uniform_return(p: Plan, episodes: int = 512, seed: int = 7) -> float:
    """Mean per-agent episode return of `p`'s trainer's own policy with every weight
    zero (uniform over the legal actions, for discrete actions)."""
    params = p.trainer.zero_policy_params()
    evaluate = jit_once(make_evaluator(p.trainer.policy(), episodes, vmapped=False))
    return float(np.mean(evaluate(params, jax.random.PRNGKey(seed))["return"]))


_BASELINES: dict[tuple, float | None] = {}   # what compiled_baseline gave, by everything it depends on
_MEMORY: dict[str, memory.MemoryEstimate] = {}   # one seed's estimate, by everything that sizes it


def memory_estimate(p: Plan) -> memory.MemoryEstimate:
    """The memory `p`'s run needs (`coplay.experiment.memory`), with what the machine has
    now; the traced part is computed once per process for runs of the same shapes."""
    exp = p.exp
    key = json.dumps([exp.algo, exp.env, exp.env_config, dataclasses.asdict(exp.algo_config), exp.run.scalarise,
                      exp.run.social, exp.run.eval_episodes], sort_keys=True, default=str)
    if key not in _MEMORY:
        _MEMORY[key] = memory.estimate(p.trainer, 1, exp.run.eval_episodes)
    return memory.for_seeds(_MEMORY[key], exp.run.seeds)


class CompiledEngine(Engine):
    """Runs a `Trainer`: every seed's updates of a chunk as one compiled program."""

    def __init__(self, exp: Experiment):
        self.exp = exp
        self.plan = plan(exp)   # all validation happens here, before any compilation
        self.learner = self.plan.trainer
        self.schedule = self.plan.schedule
        self._state: Any = None
        try:
            self.memory = memory_estimate(self.plan)
            if exp.run.check_memory and not self.memory.fits():
                m = self.memory
                raise ConfigError(f"the run needs about {memory.gb(m.total)} of memory and "
                                  f"{memory.gb(m.available or 0)} is available ({m.where}): "
                                  f"{memory.gb(2 * m.state_bytes)} for the state of {exp.run.seeds} seeds (and a "
                                  "checkpoint's copy), "
                                  f"{memory.gb(max(m.update, m.evaluation))} of working memory; "
                                  f"{memory.advice(m, exp.algo_config)}. `coplay train ... --plan` prints the "
                                  "estimate; check_memory=false runs it anyway")
        except BaseException:
            self.close()
            raise
        if exp.run.init_from is not None and exp.run.resume is None:
            try:
                warm_start.check(exp, jax.eval_shape(self.learner.init, jax.random.PRNGKey(0)))
            except BaseException:
                self.close()
                raise

    def restore(self, directory: Path) -> tuple[dict, Path]:
        """The newest usable checkpoint, loaded with the `info` entries an environment
        added since starting at zero (`checkpoint.latest`)."""
        self._state, meta, path = latest_checkpoint(directory, init_state(self.plan), self.exp,
                                                    may_be_new=is_info_entry)
        return meta, path

    def start(self, chunk: int) -> None:
        state = init_state(self.plan) if self._state is None else self._state
        if chunk == 0 and self.exp.run.init_from is not None:
            state = warm_start.apply(self.exp, state)
        self._state = place(self.plan, state)
        self._chunk = chunk_function(self.plan, self._state)
        self._evaluate = evaluation_function(self.plan)

    def train_chunk(self, chunk: int) -> dict[str, np.ndarray]:
        if not self.plan.ragged:
            self._state, metrics = self._chunk(self._state)
            return jax.device_get(metrics)
        active = self.schedule.updates_in(chunk)
        self._state, metrics = self._chunk(self._state, np.int32(active))
        return {k: v[:, :active] for k, v in jax.device_get(metrics).items()}

    def evaluate(self, chunk: int, last: bool) -> Evaluation:
        p, trainer = self.plan, self.learner
        results = jax.device_get(self._evaluate(trainer.policy_params(self._state), eval_keys(self.exp, chunk)))
        several = trainer.fronts
        if several is not None:
            assert p.reference is not None, "plan() sets it for a trainer of several objectives"
            front = several.read(results)                      # [S, P, K]
            results.update(fronts.quality(front, p.reference))
            if not last and several.move is not None:   # its weights move where its fronts can still improve
                moved = several.move(self._state, front)
                self._state = self._state if moved is self._state else place(p, moved)
        return {k: v for k, v in results.items() if k != "finished"}

    def state(self) -> Any:
        return self._state

    def baseline(self, headline: Headline) -> float | None:
        """The random policy's score, over as many episodes as the final evaluation played
        (256 to 1,024); computed once per process for runs that would compute the same."""
        exp, run = self.exp, self.exp.run
        episodes = min(max(run.eval_episodes * run.seeds, 256), 1024)
        key = (exp.algo, exp.env, json.dumps(exp.env_config, sort_keys=True, default=str), run.scalarise,
               run.preference, run.utopia, run.reference_point, headline.metric, episodes, run.seed)
        if key not in _BASELINES:
            _BASELINES[key] = compiled_baseline(headline, self.learner, self.plan.env, self.plan.reference,
                                                episodes, run.seed)
        return _BASELINES[key]

    def finish(self, run_dir: Path, rows: list[dict], evals: list[tuple[int, Evaluation]]) -> dict:
        p, exp, trainer = self.plan, self.exp, self.learner
        extra: dict[str, Any] = {"devices": describe(exp.run.seeds, trainer.num_envs)}
        several = trainer.fronts
        if several is not None:
            from coplay.experiment.report import plot_curve

            points = several.read(evals[-1][1])
            assert p.reference is not None, "plan() sets it for a trainer of several objectives"
            extra["front"] = fronts.summary(points, p.env, several.preferences, p.reference)
            if several.weights is not None:   # the weights each seed's policies ended with
                extra["front"]["final_weights"] = np.asarray(several.weights(self._state)).tolist()
            truth = extra["front"].get("true_front")
            fronts.plot_front(run_dir / "front.png", points, p.env.spec.objective_names,
                              None if truth is None else np.asarray(truth),
                              f"{exp.algo} on {exp.env}: final fronts")
            plot_curve(run_dir, rows, "eval/hypervolume", f"{exp.algo} on {exp.env}", file="hypervolume.png")
        return extra

    def close(self) -> None:
        self.plan.env.close()   # host-stepped environments hold copies and worker processes

    # ----- playing a finished run (`coplay eval`, tournaments) ------------------------------------
    def policy(self) -> Policy:
        return self.learner.policy()

    def policy_params(self) -> Any:
        """`[S, ...]`: every seed's policy parameters."""
        return self.learner.policy_params(self._state)

    def fresh_evaluation(self, episodes: int, seed: int) -> Evaluation:
        """Every seed's evaluation on `episodes` fresh episodes drawn from `seed`."""
        evaluate = jit_once(jax.vmap(self.learner.evaluator(episodes)))  # runs once
        keys = jax.random.split(jax.random.PRNGKey(seed), self.exp.run.seeds)
        return jax.device_get(evaluate(self.policy_params(), keys))

    def front(self, results: Evaluation) -> dict | None:
        """Each seed's front scored against the run's reference point, for a trainer of
        several objectives; None otherwise."""
        several = self.learner.fronts
        if several is None:
            return None
        points = several.read(results)
        assert self.plan.reference is not None, "plan() sets it for a trainer of several objectives"
        return {"points": points, "reference": self.plan.reference,
                "quality": fronts.quality(points, self.plan.reference)}

    def dialogues(self, count: int, seed: int) -> list[list[str]]:
        seed0 = jax.tree.map(lambda x: x[0], self.policy_params())
        talks = [record_dialogue(self.policy(), seed0, k) for k in jax.random.split(jax.random.PRNGKey(seed), count)]
        return [t for t in talks if t]

    def frames(self, seed: int) -> list[np.ndarray]:
        seed0 = jax.tree.map(lambda x: x[0], self.policy_params())
        return record_episode(self.policy(), seed0, jax.random.PRNGKey(seed))
