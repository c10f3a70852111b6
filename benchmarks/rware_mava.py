"""IPPO on Jumanji's RobotWarehouse `tiny-2ag` at Mava's `ff_ippo` configuration, beside Mava's published figure.

    python benchmarks/rware_mava.py                              # 3 seeds in one run, 20M env steps each
    python benchmarks/rware_mava.py --steps 200000 --seeds 2 --no-write               # a smoke run

Mava's `ff_ippo` does not run here beside coplay on the same environment code: the Mava snapshot that installs
pins a Jumanji fork (0.3.1, `sash-a/jumanji@old_jumanji`) and calls Jumanji's specs as methods, which Jumanji 1.1
(the one `coplay[jumanji]` takes) made properties; with the fork, Mava's RobotWarehouse is not the one coplay
steps. So this is not a same-run comparison: coplay trains at Mava's configuration on `jumanji:RobotWarehouse`
(Jumanji 1.1.2), and the page sets the result beside the figure Mava publishes (`PUBLISHED`), marked so.

Mava's `ff_ippo` (`mava/configs/default/ff_ippo.yaml`, `system/ppo/ff_ippo.yaml`, `arch/anakin.yaml`,
`network/mlp.yaml`, `env/rware.yaml`) mapped onto coplay's IPPO (`MAPPED`): 16 envs per update batch and 2
update batches whose gradients are averaged, i.e. 32 envs; rollouts of 128 steps; 4 epochs of 2 minibatches;
learning rate 2.5e-4 for actor and critic, not decayed; gamma 0.99, GAE lambda 0.95; clip 0.2 for the policy
and the value; entropy 0.01; value coefficient 0.5; gradient norm 0.5; advantages normalised per minibatch; one
network shared by the agents with a one-hot agent id; actor and critic each 128 x 128 ReLU; time limit 500.
Not mapped: Mava normalises advantages within each of its 2 update batches, coplay over the whole minibatch.

The measure is Mava's `episode_return`: the team's deliveries in an episode (Jumanji's reward is one team reward;
Mava averages its copies over the agents, coplay reports the per-agent return, the same number). coplay's
sampled policy (Mava's `evaluation_greedy: False`) is evaluated at `--points` points over `--episodes` episodes
per seed; the result is the IQM over seeds with its 95% bootstrap CI. Writes benchmarks/results/rware_mava.json,
then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import eval_returns, regenerate_page, stamp, table, version, write_results  # noqa: E402

RESULTS = "rware_mava.json"
COMMAND = "python benchmarks/rware_mava.py"
MAPPED = ["algo=ippo", "env=jumanji:RobotWarehouse", "env.scenario=tiny-2ag", "env.time_limit=500",
          "algo.num_envs=32", "algo.rollout_len=128", "algo.epochs=4", "algo.minibatches=2", "algo.lr=0.00025",
          "algo.anneal_lr=false", "algo.gamma=0.99", "algo.gae_lambda=0.95", "algo.clip_eps=0.2",
          "algo.clip_value=true", "algo.ent_coef=0.01", "algo.vf_coef=0.5", "algo.max_grad_norm=0.5",
          "algo.normalize_advantages=true", "algo.share_params=true", "algo.agent_id=true",
          "algo.hidden_size=128", "algo.num_layers=2", "algo.activation=relu", "algo.torso=mlp"]
PUBLISHED = {
    "figure": "Mava FF IPPO - Jumanji, tiny-2ag: test return about 15 (shaded band about 14 to 16.5) at the end of "
              "training, read off the plot",
    "source": "Mava's docs/jumanji_rware_comparison.md, image docs/images/rware_results/ff_ippo/tiny-2ag.png "
              "(github.com/instadeepai/Mava, 2023)",
    "budget": "20M env steps (Mava's README, Robotic Warehouse section), plotted against run time (about 21 min)",
    "hardware": "an NVIDIA Quadro RTX 4000 GPU",
    "seeds": "not stated",
    "environment": "Jumanji's RobotWarehouse of 2023 (an agent collision ends the episode, as in Jumanji 1.1.2)",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20_000_000, help="env steps per seed (Mava's: 20M)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--points", type=int, default=10, help="evaluations along the run")
    ap.add_argument("--episodes", type=int, default=32, help="evaluation episodes per seed and point (Mava's 32)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    if args.seeds < 1 or args.points < 1 or args.steps < args.points:
        ap.error("--seeds >= 1, --points >= 1, --steps >= --points")
    import coplay
    from coplay.eval.stats import summarize

    out = tempfile.mkdtemp(prefix="coplay-rware-")
    t0 = time.perf_counter()
    result = coplay.train([*MAPPED, f"total_steps={args.steps}", f"chunk_steps={args.steps // args.points}",
                           f"seeds={args.seeds}", f"eval_episodes={args.episodes}", "progress=false",
                           "logger=csv", f"out_dir={out}"])
    seconds = time.perf_counter() - t0
    points = []
    for step, values in eval_returns(result.run_dir).items():
        e = summarize(values)
        points.append({"env_steps": step, "per_seed": values, "iqm": [e.value, e.low, e.high]})
        print(f"{step:>11,}  return {e.value:.2f} [{e.low:.2f}, {e.high:.2f}]  per seed "
              f"{[round(v, 2) for v in values]}", flush=True)
    data = {**stamp(), "jumanji_version": version("jumanji"), "steps": args.steps, "seeds": args.seeds,
            "episodes": args.episodes, "overrides": MAPPED, "wall_s": seconds,
            "env_steps_per_s": args.steps * args.seeds / seconds, "points": points, "published": PUBLISHED}
    print(f"{seconds:.0f} s, {data['env_steps_per_s']:,.0f} env-steps/s over all seeds (compile included)")
    if args.no_write:
        print(section(data))
        return
    write_results("rware_mava", data)
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------

TITLE = "IPPO on RobotWarehouse tiny-2ag at Mava's configuration, beside Mava's published figure (not same-run)"


def section(data: dict) -> str:
    pub = data["published"]
    last = data["points"][-1]["iqm"]
    lines = [f"## {TITLE}", "",
             f"`{COMMAND} --steps {data['steps']} --seeds {data['seeds']}` on {data['machine']}; Jumanji "
             f"{data.get('jumanji_version') or '?'}. coplay's IPPO at Mava's `ff_ippo` configuration (the script's "
             f"docstring maps every field), {data['steps']:,} env steps per seed, {data['seeds']} seeds in one run, "
             f"{data['wall_s'] / 60:.0f} min in all ({data['env_steps_per_s']:,.0f} env-steps/s over the seeds, "
             f"compile and evaluations included). The sampled policy's return (the team's deliveries per "
             f"episode), {data['episodes']} episodes per seed, IQM over seeds with its 95% bootstrap CI. Mava's "
             "own script does not run here on the same environment code (the docstring says why), so the "
             "published figure is not from this run or this machine"
             + (" (its budget, 20M env steps, is the same)." if data["steps"] == 20_000_000 else
                ", nor at this budget."), ""]
    lines += table(["", "return (deliveries per episode)", "budget", "where"],
                   [["coplay IPPO", f"{last[0]:.2f} [{last[1]:.2f}, {last[2]:.2f}]",
                     f"{data['steps']:,} steps", data["machine"]],
                    ["Mava FF IPPO (published)", pub["figure"], pub["budget"],
                     f"{pub['hardware']}; seeds {pub['seeds']}; {pub['source']}"]])
    lines += ["", "coplay's curve:", ""]
    lines += table(["env steps", "return, IQM [95% CI]"],
                   [[f"{p['env_steps']:,}", f"{p['iqm'][0]:.2f} [{p['iqm'][1]:.2f}, {p['iqm'][2]:.2f}]"]
                    for p in data["points"]])
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    return []


if __name__ == "__main__":
    main()
