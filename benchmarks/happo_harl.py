"""coplay's HAPPO beside HARL's own HAPPO (PKU-MARL/HARL, PyTorch) on MPE simple spread, same run.

    python benchmarks/happo_harl.py --harl PATH --harl-deps DIR            # about 30 minutes on 2 cores
    python benchmarks/happo_harl.py --harl PATH --harl-deps DIR --quick    # one seed, 8,000 steps; nothing written

HARL is not on PyPI: PATH is a checkout of it (the folder holding `harl/` and
`tuned_configs/`). It trains on PettingZoo's `pettingzoo.mpe.simple_spread_v2` with the
versions its README installs (pettingzoo 1.22, supersuit 3.7), which coplay's own
environment does not have; give a folder holding them as `--harl-deps DIR`, made once by

    pip install --target DIR --no-deps pettingzoo==1.22.3 supersuit==3.7.0 gymnasium==0.26.3 \
        gymnasium-notices tinyscaler tensorboardX setproctitle pygame

(1.22.3: 1.22.2 does not install on Python 3.11). HARL trains in a child process with
that folder and the checkout on its path, and is otherwise run as its own script runs it.

Both sides train 3-agent simple spread with discrete actions and 25-step episodes for the
same number of environment steps (`--steps`), one seed at a time, the seeds in turn (HARL
seed s, then each coplay configuration with seed s), so that a change of the machine's
speed reaches every side alike:

- HARL: its tuned config `tuned_configs/pettingzoo_mpe/simple_spread_v2-discrete/happo`
  (20 environments in worker processes, 200 steps each per update, lr 5e-4, 5 epochs of
  one minibatch, 2 hidden layers of 128 ReLU, value normalisation, Huber value loss, every
  agent rewarded the sum of all agents' rewards), on the CPU with `torch_threads` set to
  this machine's cores, one evaluation at the end (64 episodes, its deterministic actions);
- coplay `algo=happo env=spread`, at its defaults (64 environments x 25 steps per update,
  lr 7e-4 annealed, 4 epochs of 2 minibatches, 64 tanh units, each agent its own reward),
  and with HARL's settings where coplay has the field (20 x 200, lr 5e-4 constant,
  5 epochs of 1 minibatch, gamma 0.99, clipped value loss, gradient-norm clip 10, 128 ReLU
  units); both evaluated on 64 episodes with the most likely action (`algo.greedy_eval=true`,
  as HARL evaluates).

The two environments are not the same game step for step. coplay's `spread` is mpe2's
`simple_spread_v3` (tests/test_spread.py); PettingZoo 1.22's `simple_spread_v2` starts
from the same positions for the same seed but moves an agent with the velocity after the
step's force where mpe2 moves it with the velocity before, and its reward counts every
agent's collision with itself (-1 of local reward every step, -0.5 of each agent's reward
at PettingZoo's local ratio of 0.5, -12.5 over a 25-step episode). So the returns are
given two ways, both per agent with that constant taken out:

- on the environment each side trained on: coplay's evaluation; HARL's own logged
  evaluation (the team's summed return, divided by the 3 agents, plus 12.5);
- on mpe2's `simple_spread_v3`, coplay's scale: HARL's saved actors (its own classes and
  weights, loaded in a second child process that has mpe2 instead of PettingZoo 1.22)
  play 64 episodes with their most likely action; coplay's policy's figure is the same as
  on its own environment.

Wall time runs from building the run to its final evaluation (HARL: its runner's
construction, worker processes included, to the end of `run()`; coplay: `coplay.train`,
compiling included); interpreter and library imports are outside it on both sides.
env-steps/s is the budget over that time; the ratio is per seed, coplay's rate over HARL's.

Writes benchmarks/results/happo_harl.json, then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt_ratio, git_head, keep_condition, paired, same_budget, stamp, table  # noqa: E402

RESULTS = "happo_harl.json"
COMMAND = "python benchmarks/happo_harl.py --harl PATH --harl-deps DIR"
TUNED = Path("tuned_configs") / "pettingzoo_mpe" / "simple_spread_v2-discrete" / "happo" / "config.json"
AGENTS = 3
EVAL_EPISODES = 64
HARL = "HARL HAPPO (PyTorch), its tuned config"
COPLAY: dict[str, list[str]] = {
    "coplay HAPPO, its defaults": [],
    "coplay HAPPO, HARL's settings": ["algo.num_envs=20", "algo.rollout_len=200", "algo.lr=5e-4",
                                      "algo.anneal_lr=false", "algo.epochs=5", "algo.minibatches=1",
                                      "algo.gamma=0.99", "algo.clip_value=true", "algo.max_grad_norm=10",
                                      "algo.hidden_size=128", "algo.activation=relu"],
}

SELF_COLLISION = -0.5 * 25     # what PettingZoo 1.22's spread takes from each agent's episode return

# HARL's training, in a child process with HARL and its PettingZoo on the path: its runner on
# the tuned config with the changes the parent passes as JSON on stdin, as its own
# examples/train.py builds it; prints one JSON line at the end.
TRAIN = r"""
import json, sys, time
job = json.load(sys.stdin)
config = json.load(open(job["config"]))
algo_args, env_args = config["algo_args"], config["env_args"]
for group, values in job["set"].items():
    algo_args[group].update(values)
from harl.runners import RUNNER_REGISTRY
t = time.perf_counter()
runner = RUNNER_REGISTRY["happo"]({"algo": "happo", "env": "pettingzoo_mpe", "exp_name": "coplay-bench"},
                                  algo_args, env_args)
runner.run()
runner.close()
seconds = time.perf_counter() - t
rows = [line.split(",") for line in open(runner.run_dir + "/progress.txt").read().split()]
print("RESULT " + json.dumps({"seconds": seconds, "run_dir": runner.run_dir,
                              "evals": [[int(s), float(r)] for s, r in rows]}), flush=True)
"""

# HARL's saved actors on mpe2's simple_spread_v3, in a child process with HARL and coplay's
# environment (mpe2) on the path: HARL's own actor class, loaded from the run's config and
# weights, acting with its most likely action; prints the mean episode return per agent.
EVALUATE = r"""
import json, sys
import numpy as np, torch
from mpe2 import simple_spread_v3
from harl.algorithms.actors import ALGO_REGISTRY
job = json.load(sys.stdin)
config = json.load(open(job["run_dir"] + "/config.json"))["algo_args"]
env = simple_spread_v3.parallel_env(max_cycles=25, continuous_actions=False)
agents = env.possible_agents
actors = []
for i, a in enumerate(agents):
    actor = ALGO_REGISTRY["happo"]({**config["model"], **config["algo"]}, env.observation_space(a),
                                   env.action_space(a), device=torch.device("cpu"))
    actor.actor.load_state_dict(torch.load(job["run_dir"] + f"/models/actor_agent{i}.pt"))
    actors.append(actor)
hidden = (1, config["model"]["recurrent_n"], config["model"]["hidden_sizes"][-1])
returns = []
with torch.no_grad():
    for episode in range(job["episodes"]):
        obs, _ = env.reset(seed=job["seed"] * 100_000 + episode)
        total = np.zeros(len(agents))
        while env.agents:
            acts = {}
            for i, a in enumerate(agents):
                act, _ = actors[i].act(obs[a][None].astype(np.float32), np.zeros(hidden, np.float32),
                                       np.ones((1, 1), np.float32), np.ones((1, env.action_space(a).n)),
                                       deterministic=True)
                acts[a] = int(act.reshape(-1)[0])
            obs, rew, term, trunc, _ = env.step(acts)
            total += [rew[a] for a in agents]
        returns.append(total.mean())
print("RESULT " + json.dumps(float(np.mean(returns))), flush=True)
"""


def harl_checkout(path: Path) -> Path:
    if not (path / "harl" / "runners").is_dir() or not (path / TUNED).exists():
        raise SystemExit(f"--harl {path}: not a HARL checkout (no harl/runners/ or {TUNED} there)")
    return path


def harl_deps(path: Path) -> Path:
    if not (path / "pettingzoo" / "mpe" / "simple_spread_v2.py").exists() or not (path / "supersuit").is_dir():
        raise SystemExit(f"--harl-deps {path}: no pettingzoo/mpe/simple_spread_v2.py or supersuit/ there; make it "
                         "with the pip command in this script's docstring")
    return path


def _child(code: str, job: dict, path: list[Path], cwd: Path, what: str):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, path), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(job), capture_output=True, text=True,
                          env=env, cwd=cwd)
    result = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not result:
        raise SystemExit(f"{what} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(result[-1][len("RESULT "):])


def run_harl(harl: Path, deps: Path, seed: int, steps: int, out: Path) -> dict:
    per_update = 20 * 200
    updates = steps // per_update
    job = {"config": str(harl / TUNED), "set": {
        "seed": {"seed_specify": True, "seed": seed},
        "device": {"cuda": False, "torch_threads": os.cpu_count() or 1},
        "train": {"num_env_steps": steps, "eval_interval": updates, "log_interval": max(1, updates // 4)},
        "eval": {"use_eval": True, "n_eval_rollout_threads": 8, "eval_episodes": EVAL_EPISODES},
        "logger": {"log_dir": str(out)}}}
    data = _child(TRAIN, job, [harl, deps], out, f"HARL's training, seed {seed}")
    last_steps, team = data["evals"][-1]
    if last_steps != updates * per_update:
        raise SystemExit(f"HARL seed {seed}: its last evaluation is at {last_steps} steps, not the run's end")
    own = team / AGENTS - SELF_COLLISION
    on_mpe2 = _child(EVALUATE, {"run_dir": data["run_dir"], "episodes": EVAL_EPISODES, "seed": seed}, [harl], out,
                     f"HARL's actors on mpe2, seed {seed}")
    print(f"{HARL}, seed {seed}: {own:.2f} on its environment, {on_mpe2:.2f} on mpe2, {data['seconds']:.0f} s",
          flush=True)
    return {"return": own, "return_mpe2": on_mpe2, "logged_team_return": team, "seconds": data["seconds"],
            "steps": updates * per_update}


def run_coplay(extra: list[str], seed: int, steps: int, out: Path) -> dict:
    from _common import whole_updates

    import coplay

    base = ["algo=happo", "env=spread", *extra, "seeds=1", f"seed={seed}", "algo.greedy_eval=true",
            f"eval_episodes={EVAL_EPISODES}", "eval_every=0", "progress=false", "logger=csv", f"out_dir={out}"]
    args = base + whole_updates(base, steps)
    t = time.perf_counter()
    result = coplay.train(args)
    seconds = time.perf_counter() - t
    ret = float(result.final_return["per_seed"][0])
    done = int(args[-1].split("=")[1])
    return {"return": ret, "seconds": seconds, "steps": done, "args": args}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--harl", type=Path, required=True, help="a checkout of PKU-MARL/HARL")
    ap.add_argument("--harl-deps", type=Path, required=True,
                    help="a folder holding PettingZoo 1.22 and SuperSuit 3.7 (see above)")
    ap.add_argument("--harl-commit", default=None, help="the commit of HARL that PATH holds, where it is not a git "
                    "checkout")
    ap.add_argument("--steps", type=int, default=400_000, help="env steps per seed (a multiple of 4,000 and 1,600)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one seed, 8,000 steps; nothing written")
    args = ap.parse_args()
    harl, deps = harl_checkout(args.harl.resolve()), harl_deps(args.harl_deps.resolve())
    steps, seeds = (8000, 1) if args.quick else (args.steps, args.seeds)
    if seeds < 1:
        raise SystemExit(f"--seeds {seeds}: at least 1")
    if steps <= 0 or steps % 4000 or steps % 1600:
        raise SystemExit(f"--steps {steps}: must be a multiple of 4,000 (HARL's update) and 1,600 (coplay's)")
    runs: dict[str, list[dict]] = {HARL: [], **{name: [] for name in COPLAY}}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(seeds):
            runs[HARL].append(run_harl(harl, deps, seed + 1, steps, Path(tmp)))
            for name, extra in COPLAY.items():
                r = run_coplay(extra, seed, steps, Path(tmp))
                same_budget(HARL, runs[HARL][-1]["steps"], name, r["steps"])
                print(f"{name}, seed {seed}: {r['return']:.2f} in {r['seconds']:.0f} s", flush=True)
                runs[name].append(r)
    data = {**stamp(), "steps": steps, "seeds": seeds, "runs": runs,
            "harl_commit": args.harl_commit or git_head(harl, "unknown (not a git checkout)")}
    keep_condition("happo_harl", data, args.quick, section)


# ----- the page ----------------------------------------------------------------------------------------------


def _rates(data: dict, name: str) -> list[float]:
    return [r["steps"] / r["seconds"] for r in data["runs"][name]]


def section(data: dict) -> str:
    from coplay.eval.stats import summarize

    lines = ["## HAPPO beside HARL's own HAPPO on MPE simple spread", "",
             f"`{COMMAND}` on {data['machine']} ({data['date']}, coplay {data['commit']}, HARL "
             f"{data['harl_commit']}): {data['steps']:,} env steps per seed, {data['seeds']} seeds, one seed at a "
             "time, the sides in turn. HARL: its tuned `simple_spread_v2-discrete/happo` config on PettingZoo "
             "1.22's `simple_spread_v2`, as its README installs it (20 environments in worker processes, on the "
             "CPU). coplay: `algo=happo env=spread` (mpe2's `simple_spread_v3`), at its defaults and with HARL's "
             "settings where coplay has the field. The two environments differ: `simple_spread_v2` moves an agent "
             "with its velocity after the step's force (mpe2 with the one before) and charges every agent -0.5 a "
             "step for colliding with itself, taken out here. Episode return per agent at the end, 64 episodes "
             "of the most likely action: on the environment each trained on (HARL's own logged evaluation), and "
             "on mpe2's `simple_spread_v3` (HARL's saved actors played there); IQM over seeds with 95% bootstrap "
             "interval. env-steps/s from building the run to its final evaluation, compiling and worker start-up "
             "included; the speed ratio is per seed.", ""]
    harl_rates = _rates(data, HARL)
    rows = []
    for name, runs in data["runs"].items():
        own = np.asarray([r["return"] for r in runs])
        mpe2 = np.asarray([r.get("return_mpe2", r["return"]) for r in runs])
        rates = _rates(data, name)
        ratio = "1" if name == HARL else fmt_ratio(paired(rates, harl_rates), "seeds")
        rows.append([name, str(summarize(own)), str(summarize(mpe2)), " ".join(f"{x:.2f}" for x in mpe2),
                     f"{np.median(rates):,.0f}", ratio])
    lines += table(["implementation", "return, own environment", "return on mpe2", "on mpe2, per seed",
                    "env-steps/s (median)", "speed beside HARL"], rows)
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    name = "coplay HAPPO, HARL's settings"
    return [{"claim": "coplay's HAPPO beside HARL's HAPPO (PyTorch), HARL's settings",
             "workload": f"MPE simple spread, {data['steps']:,} env steps per seed",
             "ratio": fmt_ratio(paired(_rates(data, name), _rates(data, HARL)), "seeds"),
             "machine": data["machine"]}]


if __name__ == "__main__":
    main()
