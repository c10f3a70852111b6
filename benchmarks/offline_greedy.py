"""The behaviour policies of the offline tables, played as they were recorded (drawing
their actions) and greedily (their most probable action): what a greedy offline
trainer can hope to reach.

    python benchmarks/offline_greedy.py --env foraging --behaviour-steps 400000
    python benchmarks/offline_greedy.py --env spread --behaviour-steps 1000000

The behaviour run is `offline_table.py`'s (the same command, so the same run):
MAPPO for `--behaviour-steps` steps, a checkpoint kept every tenth. Each
checkpoint's policy plays `--episodes` episodes both ways, from the same keys.
Beside the returns, the share of the greedy episodes that run out of time caught
in a loop: their last `--loop` steps revisit one or two joint observations over
and over (agents that stand still, or step back and forth), which a policy
that draws its actions leaves by chance and a greedy one never does. Results go to
benchmarks/results/offline_greedy_<env>.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import regenerate_page, stamp, table, write_results  # noqa: E402
from offline_table import behaviour_run, results_name  # noqa: E402

from coplay.experiment import checkpoint  # noqa: E402
from coplay.experiment.compiled import init_state, plan  # noqa: E402
from coplay.experiment.config import Experiment  # noqa: E402
from coplay.experiment.loop import check_checkpoint_config  # noqa: E402

RESULTS = ("offline_greedy_foraging.json", "offline_greedy_spread.json")


def player(policy, episodes: int, loop: int):
    """`(params, key) -> (return [episodes], looped [episodes])`, compiled once: per episode the
    mean return over agents, and whether it ran out of time with its last `loop` steps each
    revisiting the joint observation of one or two steps before."""
    env = policy.env

    def episode(params, key):
        k_reset, k_steps = jax.random.split(key)
        state, ts = env.reset(k_reset)

        def step(c, k):
            state, ts, carry, ret, looping, ended, before, looped = c
            k_act, k_env = jax.random.split(k)
            action, carry = policy.act(params, ts.obs[None], ts.action_mask[None], k_act, carry, ts.done[None])
            state, nxt = env.step(state, action[0], k_env)
            again = jnp.all(nxt.obs == ts.obs) | jnp.all(nxt.obs == before)
            looping = jnp.where(ended | nxt.done, looping, jnp.where(again, looping + 1, 0))   # nxt: a new episode's
            looped = jnp.where(ended, looped, nxt.truncated & (looping >= loop))
            ret = ret + jnp.where(ended, 0.0, jnp.mean(nxt.reward))
            return (state, nxt, carry, ret, looping, ended | nxt.done, ts.obs, looped), None

        init = (state, ts, policy.initial_carry((1,)), jnp.zeros(()), jnp.zeros((), jnp.int32), jnp.zeros((), bool),
                ts.obs, jnp.zeros((), bool))
        out, _ = jax.lax.scan(step, init, jax.random.split(k_steps, env.spec.max_steps))
        return out[3], out[7]

    play = jax.jit(jax.vmap(episode, in_axes=(None, 0)))
    return lambda params, key: tuple(np.asarray(x) for x in play(params, jax.random.split(key, episodes)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="spread")
    ap.add_argument("--env-overrides", nargs="*", default=[])
    ap.add_argument("--behaviour-steps", type=int, default=300_000)
    ap.add_argument("--behaviour-chunks", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--loop", type=int, default=10, help="steps of revisiting that make a loop")
    args = ap.parse_args()
    t0 = time.time()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        behaviour = behaviour_run([f"env={args.env}", *args.env_overrides], args.behaviour_steps,
                                  args.behaviour_chunks, f"{tmp}/runs")
        exp = Experiment.load(behaviour.run_dir / "config.yaml")
        drawn = plan(exp)
        greedy = plan(dataclasses.replace(exp, algo_config=dataclasses.replace(exp.algo_config, greedy_eval=True)))
        target = init_state(drawn)
        play_drawn = player(drawn.trainer.policy(), args.episodes, args.loop)
        play_greedy = player(greedy.trainer.policy(), args.episodes, args.loop)
        for path in checkpoint.list_checkpoints(behaviour.run_dir / "checkpoints"):
            state, meta = checkpoint.load(path, target, lambda m, f: check_checkpoint_config(m, exp, f))
            params = jax.tree.map(lambda x: x[0], drawn.trainer.policy_params(state))
            key = jax.random.PRNGKey(len(rows))
            ret_d, loop_d = play_drawn(params, key)
            ret_g, loop_g = play_greedy(params, key)
            rows.append({"env_steps": meta.get("env_steps"), "drawn": float(ret_d.mean()),
                         "greedy": float(ret_g.mean()), "drawn_looped": float(loop_d.mean()),
                         "greedy_looped": float(loop_g.mean())})
            print(rows[-1], flush=True)
    name = results_name(args.env, args.env_overrides)
    write_results(f"offline_greedy_{name}", {**stamp(), "settings": vars(args), "rows": rows,
                                             "seconds": time.time() - t0})
    regenerate_page()


TITLE = "The behaviour policies of the offline tables, drawing and greedy"


def section(data: dict) -> str:
    lines = [f"## {TITLE}", "",
             "The MAPPO run an offline table records its datasets from (`offline_table.py`'s, the same command), each "
             "kept checkpoint's policy playing its episodes drawing its actions (as it recorded them) and greedily, "
             "from the same keys. Looped: episodes that ran out of time with their last steps revisiting the joint "
             "observation of one or two steps before."]
    for name, d in data.items():
        a = d["settings"]
        where = f"on {d['machine']}" if "machine" in d else "(machine not recorded)"
        lines += ["", f"### {name.removeprefix('offline_greedy_')}", "",
                  f"`python benchmarks/offline_greedy.py --env {a['env']}"
                  + (f" --env-overrides {' '.join(a['env_overrides'])}" if a.get("env_overrides") else "")
                  + f" --behaviour-steps {a['behaviour_steps']} --episodes {a['episodes']}` {where}; {a['episodes']} "
                  f"episodes per checkpoint, loops of {a['loop']} steps.", "",
                  *table(["checkpoint (env steps)", "return, drawing", "return, greedy", "looped, drawing",
                          "looped, greedy"],
                         [[f"{r['env_steps']:,}", f"{r['drawn']:.3f}", f"{r['greedy']:.3f}", f"{r['drawn_looped']:.3f}",
                           f"{r['greedy_looped']:.3f}"] for r in d["rows"]])]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    return []

if __name__ == "__main__":
    main()
