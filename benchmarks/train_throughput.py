"""IPPO on `spread` beside JaxMARL's own IPPO script, timed in the same run, and
the multi-seed scaling table (seeds=1, 4, 16 on the same per-seed budget).

    python benchmarks/train_throughput.py --jaxmarl PATH/TO/JaxMARL/baselines/IPPO
    python benchmarks/train_throughput.py --jaxmarl ... --only budget --long-budget 10000000
    python benchmarks/train_throughput.py --only seeds
    python benchmarks/train_throughput.py --profile [--jaxmarl ...]   # where coplay's PPO update spends its time

Budget table. With --jaxmarl (a JaxMARL checkout's `baselines/IPPO`, or the
checkout itself; its `ippo_ff_mpe.py` imports jaxmarl, distrax, hydra-core,
omegaconf, wandb and matplotlib), five rows train for the same budget, one seed
each, interleaved (coplay, JaxMARL, coplay, JaxMARL, coplay) and repeated, so
that drift of the machine hits both libraries:

    coplay-jaxmarl-hp   coplay IPPO at JaxMARL's sizes with JaxMARL's hyperparameters
    jaxmarl-own         JaxMARL's ippo_ff_mpe.py with its config file
    coplay-coplay-hp    coplay IPPO at JaxMARL's sizes with coplay's hyperparameters
    jaxmarl-coplay-hp   JaxMARL's ippo_ff_mpe.py with coplay's hyperparameters
    coplay-default      coplay IPPO with its defaults

JaxMARL's hyperparameters are read from its config file and mapped onto
coplay's fields (MAPPED below); what one side cannot express is listed with the
table. JaxMARL's script is driven the way its own `main` does (its
`make_train(config)`, `jit(vmap(train))` over one key), with `wandb` in its
module replaced by a recorder: the script logs every update through an
`io_callback` to `wandb.log`, and the recorder keeps each logged metric and the
time it arrived, which gives JaxMARL's learning curve against wall time.

Both libraries: compile (`lower(...).compile()`) is timed apart from the steady
state; env-steps/s is the steady state; the time to a return counts compile
(and coplay's state initialisation, which JaxMARL does inside its timed call).
The training return of an update is coplay's mean over the episodes that ended
in it, and JaxMARL's own logged `returned_episode_returns` (the mean over the
rollout's steps of each agent's last finished episode return, which
MPELogWrapper multiplies by the 3 agents) divided by 3. Each library's final
policy is evaluated by its own code (sampled actions, as in training).
--long-budget trains the two runs with JaxMARL's hyperparameters once more for
that many steps (JaxMARL's config asks 1e7 and reaches -20.3 near 5M), for
their time to the target. Results go to benchmarks/results/train_throughput.json
and BENCHMARKS.md (--no-write prints the tables instead).

--profile (prints only) times coplay's IPPO update at JaxMARL's sizes whole, its
rollout alone (the trainer's acting function and environment in the same
`rollout`, trajectories kept) and one epoch instead of four, interleaved; the
learning phase is the difference. It counts the kernels in the optimized HLO:
per rollout step, per update, and in every loop (jax.random's threefry is a
5-trip loop on CPU, counted apart), for JaxMARL's script too with --jaxmarl, and
times the same update with jax_default_prng_impl=unsafe_rbg as an experiment."""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from coplay.experiment.compiled import chunk_function, init_state, plan
from coplay.experiment.config import parse_overrides
from coplay.experiment.runner import uniform_policy_return

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402  (machine and timed_run: other scripts once imported them from here)
    RESULTS as RESULTS_DIR,
)
from _common import (
    WandbRecorder,
    _load_script,
    fmt_ratio,
    git_blob,
    ippo_dir,
    jaxmarl_config,
    median,
    paired,
    regenerate_page,
    same_budget,
    stamp,
    table,
    timed_run,
    version,
)

RESULTS = "train_throughput.json"

TARGET = -20.3   # per-agent training return; what an earlier JaxMARL measurement reached after 10M steps
# JaxMARL's MPE ends an episode after 26 steps (it compares the step count before
# incrementing it); coplay's spread, like mpe2, after 25. The budget table gives
# coplay's spread JaxMARL's length unless --episode-steps says otherwise, so that a
# return means the same in every row.
JAXMARL_EPISODE_STEPS = 26
CHUNK_STEPS = 50_000   # coplay's steps between host round trips (a divisor of the run is chosen near it)

# JaxMARL config field -> coplay IPPO field. Learning hyperparameters are what the
# "coplay's hyperparameters" rows carry over to JaxMARL's script; sizes stay JaxMARL's.
SIZES = {"NUM_ENVS": "num_envs", "NUM_STEPS": "rollout_len", "UPDATE_EPOCHS": "epochs",
         "NUM_MINIBATCHES": "minibatches"}
HPARAMS = {"LR": "lr", "ANNEAL_LR": "anneal_lr", "GAMMA": "gamma", "GAE_LAMBDA": "gae_lambda",
           "CLIP_EPS": "clip_eps", "ENT_COEF": "ent_coef", "VF_COEF": "vf_coef",
           "MAX_GRAD_NORM": "max_grad_norm", "ACTIVATION": "activation"}
MAPPED = {**SIZES, **HPARAMS}
# What ippo_ff_mpe.py fixes in its code rather than its config, in coplay's fields:
# two hidden layers of 64 units for actor and critic, the value loss clipped by
# CLIP_EPS around the rollout's values, advantages normalised per minibatch, and
# observations without an agent id.
JAXMARL_CODE = {"hidden_size": 64, "num_layers": 2, "clip_value": True, "normalize_advantages": True,
                "agent_id": False}
# coplay's rate at JaxMARL's sizes (16 envs x 128 steps, 4 minibatches): its default
# 7e-4 is set for its own 64 x 25 batch in 2 minibatches; this benchmark has used
# 2.5e-3 at JaxMARL's sizes since it was written. Every other coplay field keeps its default.
COPLAY_LR_AT_JAXMARL_SIZES = 2.5e-3

ROWS = ("coplay-jaxmarl-hp", "jaxmarl-own", "coplay-coplay-hp", "jaxmarl-coplay-hp", "coplay-default")
LONG_ROWS = ("coplay-jaxmarl-hp", "jaxmarl-own")
# coplay row -> the JaxMARL row of the same sizes and budget it is compared with; coplay-default runs
# its own sizes (a whole number of its updates, not JaxMARL's budget), so it is compared with nothing.
PAIRS = {"coplay-jaxmarl-hp": "jaxmarl-own", "coplay-coplay-hp": "jaxmarl-coplay-hp"}


# ----- coplay ----------------------------------------------------------------------------------------


def chunk_updates(updates: int, per_update: int) -> int:
    """The divisor of `updates` whose chunk is nearest CHUNK_STEPS (in ratio), so the
    run is exactly `updates` updates, as many as JaxMARL's floor(budget / batch)."""
    divisors = [d for d in range(1, updates + 1) if updates % d == 0]
    return min(divisors, key=lambda d: (abs(math.log(d * per_update / CHUNK_STEPS)), -d))


def coplay_overrides(row: str, jaxmarl_config: dict) -> list[str]:
    """coplay's overrides for a coplay row; JaxMARL's values come from its config file."""
    if row == "coplay-default":
        return ["algo=ippo"]
    sizes = [f"algo.{c}={jaxmarl_config[j]}" for j, c in SIZES.items()]
    sizes += [f"algo.hidden_size={JAXMARL_CODE['hidden_size']}", f"algo.num_layers={JAXMARL_CODE['num_layers']}"]
    if row == "coplay-coplay-hp":
        return ["algo=ippo", *sizes, f"algo.lr={COPLAY_LR_AT_JAXMARL_SIZES}"]
    assert row == "coplay-jaxmarl-hp", row
    hp = [f"algo.{c}={jaxmarl_config[j]}" for j, c in HPARAMS.items()]
    code = [f"algo.{k}={v}" for k, v in JAXMARL_CODE.items() if k not in ("hidden_size", "num_layers")]
    return ["algo=ippo", *sizes, *hp, *code]


def coplay_row(row: str, jaxmarl_config: dict, budget: int, seed: int, eval_episodes: int,
               episode_steps: int) -> dict:
    overrides = coplay_overrides(row, jaxmarl_config) + ["env=spread", f"env.max_steps={episode_steps}"]
    per_update = parse_overrides(overrides).algo_config.steps_per_update
    updates = budget // per_update
    if updates < 1:
        raise SystemExit(f"--budget {budget} is smaller than one update of {row} ({per_update} steps)")
    k = chunk_updates(updates, per_update)
    r = timed_run(overrides + [f"total_steps={updates * per_update}", f"chunk_steps={k * per_update}",
                               "seeds=1", f"seed={seed}", f"eval_episodes={eval_episodes}"])
    r.update(library="coplay", row=row, seed=seed, startup_s=r["init_s"] + r["compile_s"],
             final_return=r["final_return_iqm"]["iqm"], eval_episodes=eval_episodes)
    return r


# ----- JaxMARL's script ------------------------------------------------------------------------------


def coplay_hparams_for_jaxmarl() -> dict:
    """coplay's IPPO learning hyperparameters (at JaxMARL's sizes) in JaxMARL's config fields."""
    c = parse_overrides(["algo=ippo", f"algo.lr={COPLAY_LR_AT_JAXMARL_SIZES}"]).algo_config
    return {j: getattr(c, f) for j, f in HPARAMS.items()}


def jaxmarl_row(row: str, d: Path, budget: int, seed: int, eval_episodes: int) -> dict:
    """Train JaxMARL's ippo_ff_mpe for `budget` steps, one seed, timed like coplay's rows;
    then evaluate its final policy with its own network on its own environment."""
    import jaxmarl

    mod = _load_script(d)
    config = jaxmarl_config(d)
    if row == "jaxmarl-coplay-hp":
        config.update(coplay_hparams_for_jaxmarl())
    else:
        assert row == "jaxmarl-own", row
    config.update(TOTAL_TIMESTEPS=budget, NUM_SEEDS=1, SEED=seed, WANDB_MODE="disabled")
    hparams = {k: config[k] for k in MAPPED}
    recorder, saved = WandbRecorder(), mod.wandb
    mod.wandb = recorder
    try:
        t0 = time.perf_counter()
        train = jax.jit(jax.vmap(mod.make_train(config)))    # make_train adds NUM_UPDATES etc. to config
        keys = jax.random.split(jax.random.PRNGKey(seed), 1)
        compiled = train.lower(keys).compile()
        t_compile = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(keys))
        t_train = time.perf_counter() - t0
    finally:
        mod.wandb = saved
    per_update = config["NUM_STEPS"] * config["NUM_ENVS"]
    num_updates = int(config["NUM_UPDATES"])
    returns = np.asarray(out["metrics"]["returned_episode_returns"])[0] / 3.0   # MPELogWrapper: x 3 agents
    times = [t - t0 for t, _ in recorder.logged]
    if len(times) != num_updates or any(b < a for a, b in zip(times, times[1:])):
        raise RuntimeError(f"JaxMARL's script logged {len(times)} updates (expected {num_updates}), "
                           "or not in order")
    updates = [((j + 1) * per_update, times[j], float(returns[j])) for j in range(num_updates)]

    # Final policy, sampled as in training, with the script's network on the raw environment.
    env = jaxmarl.make(config["ENV_NAME"], **config["ENV_KWARGS"])
    net = mod.ActorCritic(env.action_space(env.agents[0]).n, activation=config["ACTIVATION"])
    params = jax.tree.map(lambda x: x[0], out["runner_state"][0].params)

    def episode(key):
        key, k_reset = jax.random.split(key)
        obs, state = env.reset(k_reset)

        def step(carry, k):
            obs, state, finished, ret, ret25, t = carry
            pi, _ = net.apply(params, jnp.stack([obs[a] for a in env.agents]))
            k_act, k_env = jax.random.split(k)
            action = pi.sample(seed=k_act)
            obs, state, reward, done, _ = env.step(k_env, state, {a: action[i] for i, a in enumerate(env.agents)})
            r = jnp.stack([reward[a] for a in env.agents]) * ~finished       # first episode only
            ret, ret25 = ret + r, ret25 + r * (t < 25)
            return (obs, state, finished | done["__all__"], ret, ret25, t + 1), None

        zeros = jnp.zeros(env.num_agents)
        carry = (obs, state, jnp.zeros((), bool), zeros, zeros, 0)
        (_, _, finished, ret, ret25, _), _ = jax.lax.scan(step, carry, jax.random.split(key, env.max_steps + 5))
        return ret.mean(), ret25.mean(), finished     # per-agent returns, coplay's convention

    keys = jax.random.split(jax.random.PRNGKey(10_000 + seed), eval_episodes)
    ret, ret25, finished = jax.jit(jax.vmap(episode))(keys)
    if not bool(np.all(finished)):
        raise RuntimeError("JaxMARL evaluation episodes did not finish")
    steps = num_updates * per_update
    return {"library": "jaxmarl", "row": row, "seed": seed, "config": hparams, "env_steps_per_seed": steps,
            "compile_s": t_compile, "train_s": t_train, "startup_s": t_compile,
            "env_steps_per_s_per_seed": steps / t_train, "final_return": float(np.mean(ret)),
            "final_return_first_25_steps": float(np.mean(ret25)),
            "eval_episodes": eval_episodes, "updates": updates}


# ----- figures from a run's learning curve ---------------------------------------------------------------


def time_to_target(r: dict, target: float, window: int) -> tuple[float, int] | None:
    """(seconds, env steps) at the end of the first update where the training return,
    averaged over the updates of the trailing `window` env steps, reaches `target`;
    startup (compile, and coplay's initialisation) included. One update's return is
    noisy (some 60-80 episodes), and a run with more, smaller updates would get more
    chances to cross by chance; the window evens that out (0: no window). The first
    update is left out: in JaxMARL's logged figure it averages in zeros from before
    any episode ended."""
    ups = r["updates"][1:]
    if not ups:
        return None
    start, lo, total, count = r["updates"][0][0], 0, 0.0, 0
    for steps, secs, ret in ups:
        total, count = total + np.nan_to_num(ret), count + (not math.isnan(ret))
        while ups[lo][0] <= steps - max(window, 1):       # keep the updates of (steps - window, steps]
            total, count = total - np.nan_to_num(ups[lo][2]), count - (not math.isnan(ups[lo][2]))
            lo += 1
        if steps - start >= window and count and total / count >= target:
            return r["startup_s"] + secs, steps
    return None


def late_return(r: dict, fraction: float = 0.05) -> float:
    """Mean training return over the updates in the last `fraction` of the run's steps."""
    ups = r["updates"]
    last = ups[-1][0]
    vals = [ret for steps, _, ret in ups if steps > last * (1 - fraction) and not math.isnan(ret)]
    return float(np.mean(vals)) if vals else float("nan")


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def summary(runs: list[dict], target: float, window: int) -> dict:
    hits = [time_to_target(r, target, window) for r in runs]
    reached = [h for h in hits if h is not None]
    return {
        "env_steps_per_s": _median([r["env_steps_per_s_per_seed"] for r in runs]),
        "compile_s": _median([r["compile_s"] for r in runs]),
        "late_return": _median([late_return(r) for r in runs]),
        "final_return": _median([r["final_return"] for r in runs]),
        "target_s": _median([h[0] for h in reached]) if reached else None,
        "startup_s": _median([r["startup_s"] for r in runs]),
        "target_steps": int(_median([h[1] for h in reached])) if reached else None,
        "reached": len(reached), "runs": len(runs), "env_steps": runs[0]["env_steps_per_seed"],
    }


def speed_ratio(by_row: dict, row: str, peer: str) -> dict:
    """coplay / JaxMARL env-steps/s per repeat (both runs of a ratio from the same repeat, the same
    budget, run one after the other): median and range over repeats."""
    for c, j in zip(by_row[row], by_row[peer]):
        same_budget(f"{row} (seed {c['seed']})", c["env_steps_per_seed"], f"{peer} (seed {j['seed']})",
                    j["env_steps_per_seed"])
    return paired([c["env_steps_per_s_per_seed"] for c in by_row[row]],
                  [j["env_steps_per_s_per_seed"] for j in by_row[peer]])


# ----- the budget table -----------------------------------------------------------------------------------


def run_rows(rows, d: Path, jm_config: dict, budget: int, args, label: str) -> dict[str, list[dict]]:
    by_row: dict[str, list[dict]] = {r: [] for r in rows}
    repeats = args.repeats if label == "budget" else 1
    for rep in range(repeats):
        seed = args.seed + rep
        for row in rows:        # coplay, JaxMARL, coplay, JaxMARL, ... so drift hits both
            if row.startswith("jaxmarl"):
                r = jaxmarl_row(row, d, budget, seed, args.eval_episodes)
            else:
                r = coplay_row(row, jm_config, budget, seed, args.eval_episodes, args.episode_steps)
            by_row[row].append(r)
            hit = time_to_target(r, args.target, args.window)
            print(f"[{label} {rep + 1}/{repeats}] {row}: {r['env_steps_per_s_per_seed']:,.0f} env-steps/s, "
                  f"compile {r['compile_s']:.1f}s, train {r['train_s']:.1f}s, late training return "
                  f"{late_return(r):.2f}, final policy {r['final_return']:.2f}, "
                  + ("target not reached" if hit is None else f"{args.target} at {hit[0]:.1f}s ({hit[1]:,} steps)"),
                  flush=True)
    for row, peer in PAIRS.items():     # refused here, before anything is written, if the budgets differ
        if row in by_row and peer in by_row:
            speed_ratio(by_row, row, peer)
    return by_row


ROW_TEXT = {
    "coplay-jaxmarl-hp": ("coplay", "JaxMARL's", "JaxMARL's"),
    "jaxmarl-own": ("JaxMARL", "JaxMARL's", "JaxMARL's (its config file)"),
    "coplay-coplay-hp": ("coplay", "JaxMARL's", "coplay's"),
    "jaxmarl-coplay-hp": ("JaxMARL", "JaxMARL's", "coplay's"),
    "coplay-default": ("coplay", "coplay's", "coplay's (defaults)"),
}
COMMAND = "python benchmarks/train_throughput.py --jaxmarl PATH/TO/JaxMARL --only budget --long-budget 10000000"


def _fmt_target(s: dict) -> tuple[str, str]:
    if s["target_s"] is None:
        return f"not reached in {s['env_steps']:,} steps", "–"
    note = "" if s["reached"] == s["runs"] else f"; reached in {s['reached']} of {s['runs']} runs"
    return f"{s['target_s']:.1f} s ({s['startup_s']:.1f} s startup{note})", f"{s['target_steps']:,}"


def run_budget(args, d: Path, jm_config: dict) -> dict:
    random_return = uniform_policy_return(["algo=ippo", "env=spread", f"env.max_steps={args.episode_steps}"])
    by_row = run_rows(ROWS, d, jm_config, args.budget, args, "budget")
    long_rows = run_rows(LONG_ROWS, d, jm_config, args.long_budget, args, "long") if args.long_budget else None
    coplay_default = parse_overrides(["algo=ippo"]).algo_config
    mapping = [{"jaxmarl": j, "coplay": c, "jaxmarl_value": jm_config[j],
                "coplay_hp": coplay_hparams_for_jaxmarl()[j] if j in HPARAMS else f"{jm_config[j]} (JaxMARL's sizes)",
                "coplay_default": getattr(coplay_default, c)} for j, c in MAPPED.items()]
    mapping += [{"jaxmarl": "(in the script's code)", "coplay": c, "jaxmarl_value": v,
                 "coplay_hp": getattr(coplay_default, c), "coplay_default": getattr(coplay_default, c)}
                for c, v in JAXMARL_CODE.items()]
    import jaxmarl

    return {**stamp(), "args": {k: str(v) for k, v in vars(args).items()}, "random_return": random_return,
            "jaxmarl_version": getattr(jaxmarl, "__version__", None) or version("jaxmarl"),
            "ippo_blob": git_blob(d / "ippo_ff_mpe.py"), "config_blob": git_blob(d / "config" / "ippo_ff_mpe.yaml"),
            "runs": by_row, "long_runs": long_rows, "jaxmarl_config": jm_config, "mapping": mapping}


# ----- seeds scaling ------------------------------------------------------------------------------------


def run_seeds(args) -> dict:
    out = {}
    for seeds in (1, 4, 16):
        r = timed_run(["algo=ippo", "env=spread", f"total_steps={args.seed_budget}", f"seeds={seeds}",
                       f"chunk_steps={CHUNK_STEPS}"])
        out[str(seeds)] = r
        print(f"seeds={seeds}: {r['env_steps_per_s_total']:,.0f} env-steps/s total "
              f"(compile {r['compile_s']:.1f}s)", flush=True)
    return out


# ----- the page ---------------------------------------------------------------------------------------------

TITLE = "IPPO on simple spread beside JaxMARL's `ippo_ff_mpe.py`, in the same run"


def _budget_lines(b: dict, machine_: str) -> list[str]:
    a = b["args"]
    target, window, episode_steps = float(a["target"]), int(a["window"]), int(a["episode_steps"])
    repeats, seed0, eval_episodes = int(a["repeats"]), int(a["seed"]), int(a["eval_episodes"])
    by_row, long_rows, jm = b["runs"], b.get("long_runs"), b["jaxmarl_config"]
    s = {row: summary(runs, target, window) for row, runs in by_row.items()}
    steps = ", ".join(sorted({f"{v['env_steps']:,}" for v in s.values()}))
    jm_runs = by_row["jaxmarl-own"] + by_row["jaxmarl-coplay-hp"]
    random_return = b.get("random_return", a.get("random_return"))
    blobs = (f" (`ippo_ff_mpe.py` git blob {b['ippo_blob'][:10]}, `config/ippo_ff_mpe.yaml` blob "
             f"{b['config_blob'][:10]})" if "ippo_blob" in b else "")
    jaxmarl_version = f" {b['jaxmarl_version']}" if b.get("jaxmarl_version") else ""
    length = (f"coplay's spread runs {episode_steps}-step episodes here, JaxMARL's length (its MPE ends an episode "
              "after 26 steps; coplay's default and mpe2's is 25), so returns mean the same in every row"
              if episode_steps == JAXMARL_EPISODE_STEPS else
              f"coplay's spread runs {episode_steps}-step episodes and JaxMARL's MPE 26, so the returns of the two "
              "libraries are not on the same episodes")
    lines = [
        f"## {TITLE}", "",
        f"`{COMMAND}` on {machine_}; JaxMARL{jaxmarl_version}{blobs}, driven as its own `main` does. "
        f"One seed per run, {int(a['budget']):,} env steps asked ({steps} run: whole updates, as JaxMARL's "
        f"`TOTAL_TIMESTEPS // NUM_STEPS // NUM_ENVS`), {repeats} repeats with seeds "
        f"{', '.join(str(seed0 + i) for i in range(repeats))}; in each repeat the runs go in the table's order "
        "(coplay, JaxMARL, coplay, JaxMARL, coplay), and each figure is the median over repeats. "
        f"{length}. Env-steps/s: steady state, compile apart. coplay / JaxMARL: the ratio of the two runs named, "
        "both from the same repeat and of the same budget, median over repeats (range in brackets); coplay-default "
        "runs its own sizes and budget, so it is compared with no JaxMARL run. Training return: per agent, the "
        "mean over the updates of the last 5% of steps (JaxMARL's logged sum over its 3 agents divided by 3). "
        f"Final policy: per-agent return of the final policy, sampled as in training, {eval_episodes} episodes, by "
        f"each library's own code. Time to {target}: wall time until the training return, averaged over the "
        f"updates of the trailing {window:,} env steps, first reaches it, startup (compile, and coplay's state "
        "initialisation, which JaxMARL does inside its timed call) included and in brackets.", "",
    ]
    rows = []
    for row in ROWS:
        v, (lib, sizes, hp) = s[row], ROW_TEXT[row]
        peer = PAIRS.get(row)
        t, st = _fmt_target(v)
        rows.append([row, lib, sizes, hp, f"{v['env_steps_per_s']:,.0f}",
                     f"{fmt_ratio(speed_ratio(by_row, row, peer), 'repeats')} vs {peer}" if peer else "–",
                     f"{v['compile_s']:.1f}", f"{v['late_return']:.2f}", f"{v['final_return']:.2f}", t, st])
    lines += table(["run", "library", "sizes", "hyperparameters", "env-steps/s", "coplay / JaxMARL", "compile s",
                    "training return (per agent)", "final policy return", f"time to {target}", f"steps to {target}"],
                   rows)
    # Time to the target, run by run: a ratio only between the two runs of one repeat.
    lines += ["", f"Time to {target} run by run (seconds, startup included; steps in brackets). The runs of one "
              "repeat share their seed and ran one after another:", ""]
    per = []
    for i in range(repeats):
        cells = [str(by_row[ROWS[0]][i]["seed"])]
        for row in ROWS:
            h = time_to_target(by_row[row][i], target, window)
            cells.append("not reached" if h is None else f"{h[0]:.1f} ({h[1]:,})")
        per.append(cells)
    lines += table(["seed", *ROWS], per)
    cp, jm_hp = by_row["coplay-coplay-hp"], by_row["jaxmarl-coplay-hp"]
    both = [(time_to_target(c, target, window), time_to_target(j, target, window)) for c, j in zip(cp, jm_hp)]
    both = [(c, j) for c, j in both if c and j]
    if both:
        r = paired([j[0] for _, j in both], [c[0] for c, _ in both])
        first = sum(c[0] < j[0] for c, j in both)
        lines += ["", f"With the same sizes and coplay's hyperparameters in both libraries, JaxMARL's time to "
                  f"{target} over coplay's, repeat by repeat: {fmt_ratio(r, 'repeats')}; coplay got there first in "
                  f"{first} of {len(both)} repeats where both did, and its steps to the target were "
                  f"{', '.join(f'{c[1]:,}' for c, _ in both)} against JaxMARL's "
                  f"{', '.join(f'{j[1]:,}' for _, j in both)}: the steps a run needs to get there vary from run "
                  "to run, so this ratio is not the ratio of the libraries' speeds."]
    if long_rows:
        ls = {row: summary(runs, target, window) for row, runs in long_rows.items()}
        lines += ["", f"The runs with JaxMARL's hyperparameters again, {int(a['long_budget']):,} steps asked (once, "
                  f"seed {seed0}, coplay then JaxMARL; the learning rate anneals over this budget, as JaxMARL's "
                  f"config anneals over its `TOTAL_TIMESTEPS` of {float(jm['TOTAL_TIMESTEPS']):,.0f}):", ""]
        rows = []
        for row, v in ls.items():
            peer = PAIRS.get(row)
            t, st = _fmt_target(v)
            rows.append([row, f"{v['env_steps']:,}", f"{v['env_steps_per_s']:,.0f}",
                         f"{fmt_ratio(speed_ratio(long_rows, row, peer), 'repeats')} vs {peer}"
                         if peer in long_rows else "–", f"{v['compile_s']:.1f}", f"{v['late_return']:.2f}",
                         f"{v['final_return']:.2f}", t, st])
        lines += table(["run", "steps run", "env-steps/s", "coplay / JaxMARL", "compile s",
                        "training return at the end", "final policy return", f"time to {target}",
                        f"steps to {target}"], rows)
    lines += ["", "The configs (JaxMARL's from its config file):", ""]
    if "mapping" in b:
        lines += table(["JaxMARL field", "coplay field", "JaxMARL's config", "coplay's hyperparameters",
                        "coplay default"], [[f"`{m['jaxmarl']}`" if not m["jaxmarl"].startswith("(") else m["jaxmarl"],
                                             f"`{m['coplay']}`", m["jaxmarl_value"], m["coplay_hp"],
                                             m["coplay_default"]] for m in b["mapping"]])
    else:
        lines += table(["JaxMARL field", "JaxMARL's config"], [[f"`{k}`", v] for k, v in jm.items()
                                                              if k in MAPPED or k == "ENV_NAME"])
        lines += ["", "coplay's overrides, row by row:", ""]
        lines += [f"- {row}: `{' '.join(runs[0]['overrides'])}`" for row, runs in by_row.items()
                  if runs[0].get("overrides")]
    jm_first25 = median([r["final_return_first_25_steps"] for r in jm_runs])
    jm_all = median([r["final_return"] for r in jm_runs])
    lines += ["", "What neither config can change: JaxMARL clips one global gradient norm over actor and critic "
              "together, coplay clips each apart; JaxMARL anneals the learning rate once per update, coplay per "
              "minibatch step (both linearly to 0 over the run); with coplay's hyperparameters JaxMARL still clips "
              "the value loss and feeds no agent id (its script has no switch for either). JaxMARL's steady-state "
              "time includes its script's per-update `io_callback` to `wandb.log` (here a recorder that keeps the "
              f"metric). JaxMARL's 26th step: its final policies get {jm_all:.2f} per agent over the whole episode "
              f"and {jm_first25:.2f} over its first 25 steps (medians)."
              + (f" A uniformly random policy gets {float(random_return):.2f} per agent on coplay's "
                 f"{episode_steps}-step "
                 "episodes." if random_return is not None else "")]
    return lines


def _seeds_lines(seeds: dict, machine_: str) -> list[str]:
    base = seeds["1"]["env_steps_per_s_total"]
    budget = seeds["1"]["overrides"][2].split("=")[1] if seeds["1"].get("overrides") else "?"
    rows = [[s, f"{r['env_steps_per_s_total']:,.0f}", f"{r['env_steps_per_s_total'] / base:.2f}x",
             f"{r['compile_s']:.1f}"] for s, r in seeds.items()]
    return ["## IPPO with several seeds in one compiled run", "",
            f"`python benchmarks/train_throughput.py --only seeds` on {machine_}. IPPO on `spread`, "
            f"{int(budget):,} env steps asked per seed ({seeds['1']['env_steps_per_seed']:,} run), seeds vmapped in "
            "one compiled run; the three runs one after another.", "",
            *table(["seeds", "total env-steps/s", "vs 1 seed", "compile s"], rows)]


def section(data: dict) -> str:
    out = []
    if data.get("budget"):
        out += _budget_lines(data["budget"], data["budget"].get("machine", data.get("machine", "?")))
    if data.get("seeds"):
        seeds = data["seeds"]
        runs = {k: v for k, v in seeds.items() if k.isdigit()}
        out += ["", *_seeds_lines(runs, seeds.get("machine", data.get("machine", "?")))]
    return "\n".join(out).strip()


def claims(data: dict) -> list[dict]:
    b = data.get("budget")
    if not b:
        return []
    machine_ = b.get("machine", data.get("machine", "?"))
    out = []
    for row, what in (("coplay-jaxmarl-hp", "JaxMARL's config"), ("coplay-coplay-hp", "coplay's hyperparameters")):
        r = speed_ratio(b["runs"], row, PAIRS[row])
        out.append({"claim": f"IPPO training env-steps/s beside JaxMARL's `ippo_ff_mpe.py`, {what} in both",
                    "workload": f"spread, 16 envs x 128 steps, {b['runs'][row][0]['env_steps_per_seed']:,} steps, "
                                "one seed per run",
                    "ratio": fmt_ratio(r, "repeats"), "machine": machine_})
    return out


# ----- --profile: where coplay's PPO update spends its time ----------------------------------------------

_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (?:\([^=]*?\)|\S+) ([a-z][a-z0-9\-]*)\((.*)$")
# Instructions that move no data and launch nothing on CPU.
_FREE = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast", "after-all", "opt-barrier"}
_CONTROL = {"while", "conditional", "call"}


def hlo_computations(text: str) -> tuple[dict[str, list[tuple[str, str]]], str]:
    """The optimized HLO's computations: name -> [(opcode, operands and attributes)], and the entry's name."""
    comps, entry, current = {}, "", None
    for line in text.splitlines():
        line = re.sub(r"/\*.*?\*/", "", line)      # tuple types carry /*index=5*/ comments
        m = _COMPUTATION.match(line)
        if m:
            current = comps.setdefault(m.group(1), [])
            if line.startswith("ENTRY"):
                entry = m.group(1)
            continue
        if line.strip() == "}":
            current = None
            continue
        if current is not None:
            m = _INSTRUCTION.match(line)
            if m:
                current.append((m.group(2), m.group(3)))
    return comps, entry


def _callees(op: str, rest: str) -> list[str]:
    if op == "while":
        return re.findall(r"(?:condition|body)=%?([\w.\-]+)", rest)
    if op == "conditional":
        m = re.search(r"branch_computations=\{([^}]*)\}", rest)
        names = m.group(1).split(",") if m else re.findall(r"(?:true|false)_computation=%?([\w.\-]+)", rest)
        return [n.strip().lstrip("%") for n in names]
    if op == "call":
        return re.findall(r"to_apply=%?([\w.\-]+)", rest)
    return []


def _trip_count(rest: str) -> int | None:
    m = re.search(r'"known_trip_count":\{"n":"(\d+)"', rest)
    return int(m.group(1)) if m else None


def _deep_opcodes(comps: dict, name: str, seen: set | None = None) -> set[str]:
    """Every opcode in computation `name` and in what it calls (fusions included)."""
    seen = set() if seen is None else seen
    if name in seen:
        return set()
    seen.add(name)
    out = set()
    for op, rest in comps.get(name, []):
        out.add(op)
        for callee in re.findall(r"(?:calls|to_apply|body|condition)=%?([\w.\-]+)", rest):
            out |= _deep_opcodes(comps, callee, seen)
    return out


def _is_rng(comps: dict, rest: str) -> bool:
    """A while loop that jax.random's threefry2x32 hash lowers to on CPU: `fori_loop(0, 5, ...)`
    over rounds of 32-bit adds, rotations (shifts) and xors (jax/_src/random/threefry2x32.py)."""
    if _trip_count(rest) != 5:
        return False
    body = re.search(r"body=%?([\w.\-]+)", rest).group(1)
    return {"xor", "shift-left", "shift-right-logical"} <= _deep_opcodes(comps, body)


def kernel_executions(comps: dict, name: str, nested: bool = True, rng: bool = True) -> int:
    """Kernels run by one call of computation `name`: every instruction that neither is
    free nor only steers control (while, conditional, call), plus what those run: a
    loop's condition and body trip-count times (once when unknown), the largest branch
    of a conditional, a called computation. `nested=False` leaves loops out; `rng=False`
    leaves out the loops of jax.random's threefry."""
    total = 0
    for op, rest in comps.get(name, []):
        if op in _FREE:
            continue
        if op not in _CONTROL:
            total += 1
            continue
        if op == "while" and (not nested or (not rng and _is_rng(comps, rest))):
            continue
        runs = [kernel_executions(comps, c, nested, rng) for c in _callees(op, rest)]
        if op == "while":
            total += (_trip_count(rest) or 1) * sum(runs)
        elif op == "conditional":
            total += max(runs, default=0)
        else:
            total += sum(runs)
    return total


def _opcodes(comps: dict, name: str, hist: dict[str, int]) -> dict[str, int]:
    """Histogram of the kernels of `name`, calls and conditionals included, loops not."""
    for op, rest in comps.get(name, []):
        if op in _FREE or op == "while":
            continue
        if op in _CONTROL:
            for c in _callees(op, rest):
                _opcodes(comps, c, hist)
        else:
            hist[op] = hist.get(op, 0) + 1
    return hist


def _label(comps: dict, rest: str) -> str:
    return "jax.random threefry" if _is_rng(comps, rest) else ""


def loops(comps: dict, name: str, depth: int = 0) -> list[dict]:
    """Every while loop under `name`, outermost first, with its kernels per iteration."""
    out = []
    for op, rest in comps.get(name, []):
        if op == "while":
            body = re.search(r"body=%?([\w.\-]+)", rest).group(1)
            hist = _opcodes(comps, body, {})
            out.append({"depth": depth, "trip_count": _trip_count(rest), "label": _label(comps, rest), "body": body,
                        "kernels_per_iteration": kernel_executions(comps, body, nested=False),
                        "with_nested_loops": kernel_executions(comps, body),
                        "without_rng_loops": kernel_executions(comps, body, rng=False),
                        "opcodes": dict(sorted(hist.items(), key=lambda kv: -kv[1]))})
            out += loops(comps, body, depth + 1)
        elif op in ("conditional", "call"):
            for c in _callees(op, rest):
                out += loops(comps, c, depth)
    return out


def hlo_report(compiled_text: str) -> dict:
    comps, entry = hlo_computations(compiled_text)
    return {"kernels_per_call": kernel_executions(comps, entry), "loops": loops(comps, entry),
            "instructions": sum(len(v) for v in comps.values())}


def _print_loops(title: str, report: dict) -> None:
    """The loop tree; runs of identical sibling loops (jax.random's) are printed once with a count."""
    print(f"  {title}: {report['kernels_per_call']:,} kernel executions per call", flush=True)
    rows: list[list] = []
    for lp in report["loops"]:
        key = (lp["depth"], lp["trip_count"], lp["label"], lp["with_nested_loops"])
        if rows and rows[-1][0] == key:
            rows[-1][2] += 1
        else:
            rows.append([key, lp, 1])
    for _, lp, n in rows:
        top = ", ".join(f"{o} {c}" for o, c in list(lp["opcodes"].items())[:5])
        many = f"{n} x " if n > 1 else ""
        rng = (f", {lp['with_nested_loops'] - lp['without_rng_loops']} of them in jax.random loops"
               if lp["with_nested_loops"] != lp["without_rng_loops"] else "")
        label = f" ({lp['label']})" if lp["label"] else ""
        print(f"  {'  ' * lp['depth']}- {many}loop x{lp['trip_count']}{label}: {lp['kernels_per_iteration']} "
              f"kernels per iteration, {lp['with_nested_loops']} with nested loops{rng} [{top}]")


def _rollout_step(report: dict, length: int, envs: int, agents: int, who: str) -> int | None:
    """Print and return the kernels of one rollout step: the heaviest loop of `length` trips."""
    found = [(i, lp) for i, lp in enumerate(report["loops"]) if lp["trip_count"] == length]
    if not found:
        print(f"  {who}: no loop of {length} trips in the compiled code")
        return None
    i, lp = max(found, key=lambda f: f[1]["with_nested_loops"])
    rng_calls = 0
    for child in report["loops"][i + 1:]:
        if child["depth"] <= lp["depth"]:
            break
        rng_calls += child["depth"] == lp["depth"] + 1 and child["label"] == "jax.random threefry"
    total = lp["with_nested_loops"]
    print(f"  {who} rollout step: {total} kernels (one step of all {envs} envs x {agents} agents, "
          f"{total / envs:.1f} per env step), {total - lp['without_rng_loops']} of them in {rng_calls} jax.random "
          "calls (threefry, a rolled loop of 5 rounds on CPU)")
    return total


def _time_interleaved(fns: dict, states: dict, calls: int) -> dict[str, float]:
    """Median seconds per call of each compiled `f` (state in, state first out), timed in
    turn (a, b, c, a, b, c, ...) after one warm-up call each, so drift hits all alike."""
    states = {n: jax.block_until_ready(f(states[n])[0]) for n, f in fns.items()}
    times: dict[str, list[float]] = {n: [] for n in fns}
    for _ in range(calls):
        for n, f in fns.items():
            t0 = time.perf_counter()
            states[n] = jax.block_until_ready(f(states[n])[0])
            times[n].append(time.perf_counter() - t0)
    return {n: statistics.median(t) for n, t in times.items()}


def run_profile(args, d: Path | None, jm_config: dict | None) -> dict:
    """Time coplay's IPPO update at JaxMARL's sizes whole, its rollout alone and (by
    difference) its learning phase; count the kernels XLA compiled for each."""
    from coplay.algos.common.rollout import rollout

    sizes = (coplay_overrides("coplay-coplay-hp", jm_config) if jm_config else
             ["algo=ippo", "algo.num_envs=16", "algo.rollout_len=128", "algo.epochs=4", "algo.minibatches=4",
              "algo.hidden_size=64", "algo.num_layers=2", f"algo.lr={COPLAY_LR_AT_JAXMARL_SIZES}"])
    k = args.profile_updates
    out: dict = {"overrides": sizes, "updates_per_call": k}

    def build(extra):
        exp = parse_overrides(sizes + extra + ["env=spread", "seeds=1", f"seed={args.seed}", "progress=false",
                                               "logger=csv"])
        per = exp.algo_config.steps_per_update
        exp = parse_overrides([f"total_steps={k * per}", f"chunk_steps={k * per}"], base=exp)
        return plan(exp)

    p = build([])
    trainer, c = p.trainer, p.trainer.config
    per_update = trainer.steps_per_update
    print(f"coplay IPPO at JaxMARL's sizes: {c.num_envs} envs x {c.rollout_len} steps = {per_update} env steps "
          f"per update, {c.epochs} epochs x {c.minibatches} minibatches; {k} updates per timed call", flush=True)

    state = init_state(p)
    update_fn = chunk_function(p).lower(state).compile()

    # The rollout alone: the same acting function and environment as `update`, scanned k
    # times; every trajectory is returned, so it is stored as in `update` and nothing is dead code.
    if not hasattr(trainer, "_act"):
        raise SystemExit(f"--profile needs {type(trainer).__name__}._act (the MAPPO family's acting function)")

    def rollouts(s, length):
        def one(s, _):
            key, k_roll = jax.random.split(s.key)
            act = lambda carry, ts, kk: trainer._act(s.params, carry, ts, kk)  # noqa: E731
            (env_state, ts, carry), traj = rollout(trainer.env, act, s.env_state, s.ts, s.carry, k_roll, c.rollout_len)
            return s.replace(env_state=env_state, ts=ts, carry=carry, key=key), traj

        return jax.lax.scan(one, s, None, length)

    rollout_state = init_state(p)
    rollout_fn = jax.jit(jax.vmap(lambda s: rollouts(s, k))).lower(rollout_state).compile()
    # Cross-check that needs only the public config: one epoch instead of c.epochs.
    p1 = build(["algo.epochs=1"])
    state1 = init_state(p1)
    one_epoch_fn = chunk_function(p1).lower(state1).compile()
    # An experiment for whoever optimises next: the same update with XLA's RngBitGenerator
    # (jax_default_prng_impl=unsafe_rbg) instead of threefry, whose every call is a loop on CPU.
    # Other random streams, so other (equally valid) learning runs.
    default_impl = jax.config.jax_default_prng_impl
    jax.config.update("jax_default_prng_impl", "unsafe_rbg")
    try:
        p_rbg = build([])
        state_rbg = init_state(p_rbg)
        rbg_fn = chunk_function(p_rbg).lower(state_rbg).compile()
    finally:
        jax.config.update("jax_default_prng_impl", default_impl)
    t = _time_interleaved({"update": update_fn, "rollout": rollout_fn, "one_epoch": one_epoch_fn, "rbg": rbg_fn},
                          {"update": state, "rollout": rollout_state, "one_epoch": state1, "rbg": state_rbg},
                          args.profile_calls)
    t_update, t_rollout, t_one_epoch, t_rbg = t["update"] / k, t["rollout"] / k, t["one_epoch"] / k, t["rbg"] / k
    per_epoch = (t_update - t_one_epoch) / max(c.epochs - 1, 1)

    learn = t_update - t_rollout
    print(f"  update: {t_update * 1e3:.1f} ms ({per_update / t_update:,.0f} env-steps/s)")
    print(f"  rollout alone ({c.rollout_len} steps of {c.num_envs} envs, acting + critic + env step): "
          f"{t_rollout * 1e3:.1f} ms ({100 * t_rollout / t_update:.0f}%; {c.rollout_len * c.num_envs / t_rollout:,.0f} "
          "env-steps/s)")
    print(f"  learning (update - rollout: GAE, batching, {c.epochs} epochs x {c.minibatches} minibatches): "
          f"{learn * 1e3:.1f} ms ({100 * learn / t_update:.0f}%)")
    print(f"  cross-check by epochs: update with 1 epoch {t_one_epoch * 1e3:.1f} ms, so one epoch ~ "
          f"{per_epoch * 1e3:.1f} ms and rollout + GAE + batching ~ {(t_one_epoch - per_epoch) * 1e3:.1f} ms")

    one_rollout = hlo_report(jax.jit(jax.vmap(lambda s: rollouts(s, 1))).lower(rollout_state).compile().as_text())
    update_hlo = hlo_report(update_fn.as_text())
    steps_loop = _rollout_step(one_rollout, c.rollout_len, c.num_envs, trainer.num_agents, "coplay")
    print(f"  whole update: {update_hlo['kernels_per_call'] / k:,.0f} kernels per update, "
          f"{update_hlo['kernels_per_call'] / k / per_update:.1f} per env step")
    rbg_hlo = hlo_report(rbg_fn.as_text())
    print(f"  with jax_default_prng_impl=unsafe_rbg (an experiment; src unchanged): {t_rbg * 1e3:.1f} ms per update "
          f"({per_update / t_rbg:,.0f} env-steps/s, {t_update / t_rbg:.2f}x), "
          f"{rbg_hlo['kernels_per_call'] / k:,.0f} kernels per update")
    _print_loops("coplay rollout alone (optimized HLO)", one_rollout)
    _print_loops(f"coplay chunk of {k} updates (optimized HLO)", update_hlo)
    out.update(update_s=t_update, rollout_s=t_rollout, learning_s=learn, update_one_epoch_s=t_one_epoch,
               epoch_s=per_epoch, kernels_per_rollout_step=steps_loop, rollout_hlo=one_rollout,
               update_hlo=update_hlo, env_steps_per_update=per_update,
               update_unsafe_rbg_s=t_rbg, update_unsafe_rbg_hlo=rbg_hlo)

    if d is not None:   # the same counts for JaxMARL's script, for comparison
        mod = _load_script(d)
        config = jaxmarl_config(d)
        config.update(TOTAL_TIMESTEPS=k * config["NUM_STEPS"] * config["NUM_ENVS"], NUM_SEEDS=1)
        saved, mod.wandb = mod.wandb, WandbRecorder()
        try:
            lowered = jax.jit(jax.vmap(mod.make_train(config))).lower(jax.random.split(jax.random.PRNGKey(0), 1))
            jm = hlo_report(lowered.compile().as_text())
        finally:
            mod.wandb = saved
        jm_per_update = config["NUM_STEPS"] * config["NUM_ENVS"]
        _rollout_step(jm, config["NUM_STEPS"], config["NUM_ENVS"], 3, "JaxMARL")
        print(f"  JaxMARL whole train of {k} updates: {jm['kernels_per_call'] / k:,.0f} kernels per update, "
              f"{jm['kernels_per_call'] / k / jm_per_update:.1f} per env step (initialisation included)")
        _print_loops("JaxMARL train (optimized HLO)", jm)
        out["jaxmarl_hlo"] = jm
    return out


# ----- main -------------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=("budget", "seeds"))
    ap.add_argument("--jaxmarl", type=Path,
                    help="a JaxMARL checkout (or its baselines/IPPO directory); needed for the budget table")
    ap.add_argument("--budget", type=int, default=1_000_000, help="env steps asked per run (default 1M)")
    ap.add_argument("--long-budget", type=int, default=0,
                    help="also train the two runs with JaxMARL's hyperparameters this long, once (10000000 is "
                         "JaxMARL's TOTAL_TIMESTEPS; it reaches the target after about 5M steps); 0: off")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats of the budget rows")
    ap.add_argument("--target", type=float, default=TARGET, help="per-agent training return to time")
    ap.add_argument("--window", type=int, default=20_000,
                    help="env steps of training return averaged for the time to target (0: one update)")
    ap.add_argument("--episode-steps", type=int, default=JAXMARL_EPISODE_STEPS,
                    help="episode length of coplay's spread in the budget table (26: JaxMARL's MPE; 25: coplay's "
                         "default and mpe2's)")
    ap.add_argument("--eval-episodes", type=int, default=128)
    ap.add_argument("--seed-budget", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true",
                    help="only print where coplay's update spends its time at JaxMARL's sizes (rollout vs "
                         "learning, kernels per step); writes nothing to BENCHMARKS.md")
    ap.add_argument("--profile-updates", type=int, default=10, help="updates per timed call in --profile")
    ap.add_argument("--profile-calls", type=int, default=5, help="timed calls in --profile")
    ap.add_argument("--no-write", action="store_true",
                    help="print the tables instead of writing BENCHMARKS.md and the results file")
    args = ap.parse_args()
    d = ippo_dir(args.jaxmarl) if args.jaxmarl else None
    jm_config = jaxmarl_config(d) if d else None
    if args.profile:
        run_profile(args, d, jm_config)
        return
    if args.only in (None, "budget") and d is None:
        ap.error("the budget table times JaxMARL's ippo_ff_mpe.py beside coplay: pass --jaxmarl PATH "
                 "(a JaxMARL checkout), or --only seeds")

    path = RESULTS_DIR / RESULTS
    results = json.loads(path.read_text()) if path.exists() else {}
    results.pop("machine", None)          # each part records its own
    if args.only in (None, "budget"):
        results["budget"] = run_budget(args, d, jm_config)
    if args.only in (None, "seeds"):
        results["seeds"] = {**run_seeds(args), **stamp()}
    if args.no_write:
        print(section(results))
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str))
    regenerate_page()


if __name__ == "__main__":
    main()
