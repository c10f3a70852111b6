"""Q-learning training throughput (IQL, VDN, QMIX) on `spread` and `foraging` at
a fixed budget, with the return reached.

    python benchmarks/q_throughput.py                # every row
    python benchmarks/q_throughput.py --budget 200000 --only spread
    python benchmarks/q_throughput.py --only spread --jaxmarl PATH/TO/JaxMARL/baselines/QLearning

With --jaxmarl (a JaxMARL checkout's `baselines/QLearning`; its scripts import
jaxmarl, flashbax, hydra-core, omegaconf and wandb), JaxMARL's `iql_rnn.py` and
`qmix_rnn.py` train on JaxMARL's MPE simple-spread in the same run, from their
MPE config file (GRU of 64 units, 8 envs x 26 steps, 32 episodes per gradient
step, lr 0.005, gamma 0.9, RAdam) and the same budget, beside coplay rows set
to the same sizes and hyperparameters (coplay uses Adam). JaxMARL's in-training
test episodes are switched off: under the script's vmap over seeds its
`lax.cond` would run them on every update. Its final greedy policy is
evaluated after the timed run with its own network and rollout wrapper.

Each row is one seed trained for the budget, timed like train_throughput.py
(compile apart from the steady state; the steady-state time includes acting,
replay writes and sampling, and every gradient step). Returns are per-agent
episode returns of the greedy policy over 32 evaluation episodes.
Results go to benchmarks/results/q_throughput.json and BENCHMARKS.md."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write_section  # noqa: E402
from train_throughput import machine, timed_run  # noqa: E402

from coplay.experiment.config import parse_overrides  # noqa: E402

ENVS = {
    "spread": ["env=spread"],
    "foraging": ["env=foraging", "env.grid_size=6"],  # 2 agents, 2 food, 50 steps
}
# JaxMARL's ql_rnn_mpe.yaml ("valid for iql, vdn, qmix"), in coplay's terms
JAXMARL_RNN_MPE = ["algo.recurrent=true", "algo.num_layers=1", "algo.hidden_size=64", "algo.num_envs=8",
                   "algo.rollout_len=26", "algo.seq_len=26", "algo.batch_size=32", "algo.grad_steps=1",
                   "algo.buffer_size=130000", "algo.learning_starts=10000", "algo.lr=0.005", "algo.gamma=0.9",
                   "algo.eps_decay=0.1", "algo.max_grad_norm=25", "algo.target_interval=200"]
JAXMARL_QMIX = ["algo.mixer_embed=32", "algo.hypernet_hidden=128", "algo.mixer_init_scale=0.001"]
ROWS = [
    ("iql", "feed-forward", []),
    ("vdn", "feed-forward", []),
    ("qmix", "feed-forward", []),
    ("iql", "GRU, JaxMARL's MPE config", JAXMARL_RNN_MPE),
    ("qmix", "GRU, JaxMARL's MPE config", JAXMARL_RNN_MPE + JAXMARL_QMIX),
]
JAXMARL_SCRIPTS = {"iql": "iql_rnn", "qmix": "qmix_rnn"}  # peers of the GRU rows on spread


def _jaxmarl_row(baselines: Path, script: str, budget: int, episodes: int = 32) -> dict:
    """Train JaxMARL's `script` (iql_rnn or qmix_rnn) on MPE simple-spread for `budget`
    steps, one seed, timed like coplay's rows; then evaluate its greedy policy."""
    import yaml
    from jaxmarl import make
    from jaxmarl.wrappers.baselines import CTRolloutManager, MPELogWrapper

    sys.path.insert(0, str(baselines))
    mod = importlib.import_module(script)
    config = {**yaml.safe_load((baselines / "config" / "config.yaml").read_text()),
              **yaml.safe_load((baselines / "config" / "alg" / "ql_rnn_mpe.yaml").read_text())}
    config.update(TOTAL_TIMESTEPS=budget, NUM_SEEDS=1, TEST_DURING_TRAINING=False, WANDB_MODE="disabled")
    env = MPELogWrapper(make(config["ENV_NAME"]))
    train = jax.jit(jax.vmap(mod.make_train(config, env)))
    rngs = jax.random.split(jax.random.PRNGKey(0), 1)
    t0 = time.perf_counter()
    compiled = train.lower(rngs).compile()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(rngs))
    t_train = time.perf_counter() - t0
    params = jax.tree.map(lambda x: x[0], out["runner_state"][0].params)
    params = params.get("agent", params)  # qmix_rnn keeps {"agent", "mixer"}
    steps = int(config["NUM_UPDATES"]) * config["NUM_STEPS"] * config["NUM_ENVS"]

    # Greedy evaluation with the script's own network and batched env wrapper.
    test_env = CTRolloutManager(env, batch_size=episodes)
    net = mod.RNNQNetwork(action_dim=test_env.max_action_space, hidden_dim=config["HIDDEN_SIZE"])
    agents = env.agents
    obs, state = test_env.batch_reset(jax.random.PRNGKey(1))
    hidden = mod.ScannedRNN.initialize_carry(config["HIDDEN_SIZE"], len(agents), episodes)
    dones = jnp.zeros((len(agents), episodes), bool)

    def step(carry, key):
        obs, state, hidden, dones, finished = carry
        stacked = jnp.stack([obs[a] for a in agents])[:, None]
        hidden, q = jax.vmap(net.apply, in_axes=(None, 0, 0, 0))(params, hidden, stacked, dones[:, None])
        valid = test_env.get_valid_actions(state.env_state)
        q = q[:, 0] - (1 - jnp.stack([valid[a] for a in agents])) * 1e10
        actions = {a: jnp.argmax(q[i], -1) for i, a in enumerate(agents)}
        obs, state, rewards, done, _ = test_env.batch_step(key, state, actions)
        reward = jnp.stack([rewards[a] for a in agents]) * ~finished     # [N, episodes], first episode only
        finished = finished | done["__all__"]
        dones = jnp.stack([done[a] for a in agents])
        return (obs, state, hidden, dones, finished), reward

    carry = (obs, state, hidden, dones, jnp.zeros((episodes,), bool))
    (*_, finished), rewards = jax.lax.scan(jax.jit(step), carry, jax.random.split(jax.random.PRNGKey(2), 30))
    assert bool(finished.all()), "JaxMARL evaluation episodes did not finish in 30 steps"
    per_episode = np.asarray(rewards.sum(0).mean(0))                # per-agent return, coplay's convention
    return {"script": script, "env_steps_per_seed": steps, "compile_s": t_compile, "train_s": t_train,
            "env_steps_per_s_per_seed": steps / t_train,
            "final_return_mean": float(per_episode.mean()), "episodes": episodes}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=300_000)
    ap.add_argument("--only", choices=tuple(ENVS))
    ap.add_argument("--jaxmarl", type=Path, help="a JaxMARL checkout's baselines/QLearning directory")
    args = ap.parse_args()
    results = {"machine": machine(), "budget": args.budget, "rows": [], "jaxmarl": []}
    command = ("python benchmarks/q_throughput.py" + (f" --budget {args.budget}" if args.budget != 300_000 else "")
               + (f" --only {args.only}" if args.only else "") + (" --jaxmarl ..." if args.jaxmarl else ""))
    lines = [f"Machine: {machine()}. Command: `{command}`.", "",
             f"One seed, {args.budget:,} environment steps asked (rounded down to whole updates: {{steps}} run), "
             "coplay's Q defaults unless noted (16 envs x 8 steps per update, 2 gradient steps of 64 windows, "
             "MLP 2x64 relu). The GRU rows use JaxMARL's `ql_rnn_mpe.yaml` (Dense 64, GRU 64, 8 envs x 26 steps "
             "per update, one gradient step on 32 windows of 26 steps, lr 0.005, gamma 0.9, target every 200 "
             "steps). Return: per-agent episode return of the greedy policy, 32 episodes; a uniformly random "
             "policy gets about -27.7 on spread.", "",
             "| env | algo | agent network | env-steps/s | gradient steps/s | train s | compile s | return |",
             "|---|---|---|---|---|---|---|---|"]
    coplay_gru = {}
    for env, env_args in ENVS.items():
        if args.only and env != args.only:
            continue
        for algo, label, extra in ROWS:
            overrides = [f"algo={algo}", *env_args, *extra, f"total_steps={args.budget}", "seeds=1",
                         f"chunk_steps={args.budget}", "eval_episodes=32"]
            r = timed_run(overrides)
            c = parse_overrides(overrides).algo_config
            grad_sps = r["env_steps_per_s_per_seed"] / (c.num_envs * c.rollout_len) * c.grad_steps
            r.update({"env": env, "algo": algo, "network": label, "grad_steps_per_s": grad_sps})
            results["rows"].append(r)
            if env == "spread" and extra and extra[:len(JAXMARL_RNN_MPE)] == JAXMARL_RNN_MPE:
                coplay_gru[algo] = r
            print(f"{env} {algo} {label}: {r['env_steps_per_s_per_seed']:,.0f} env-steps/s, "
                  f"return {r['final_return_iqm']['iqm']:.2f}", flush=True)
            lines.append(f"| {env} | {algo} | {label} | {r['env_steps_per_s_per_seed']:,.0f} | {grad_sps:,.0f} | "
                         f"{r['train_s']:.1f} | {r['compile_s']:.1f} | {r['final_return_iqm']['iqm']:.2f} |")
    steps = ", ".join(f"{n:,}" for n in sorted({r["env_steps_per_seed"] for r in results["rows"]}))
    lines[2] = lines[2].replace("{steps}", steps)
    if args.jaxmarl and coplay_gru:
        import jaxmarl
        lines += ["", f"Beside JaxMARL {getattr(jaxmarl, '__version__', '')} in the same run (its "
                  "`baselines/QLearning` scripts, MPE simple-spread, the same budget and sizes, in-training tests "
                  "off; JaxMARL uses RAdam where coplay uses Adam):", "",
                  "| algo | JaxMARL env-steps/s | coplay env-steps/s | coplay / JaxMARL | JaxMARL compile s | "
                  "JaxMARL return | coplay return |", "|---|---|---|---|---|---|---|"]
        for algo, script in JAXMARL_SCRIPTS.items():
            if algo not in coplay_gru:
                continue
            j = _jaxmarl_row(args.jaxmarl, script, args.budget)
            results["jaxmarl"].append(j)
            c = coplay_gru[algo]
            print(f"jaxmarl {script}: {j['env_steps_per_s_per_seed']:,.0f} env-steps/s, "
                  f"return {j['final_return_mean']:.2f}", flush=True)
            lines.append(f"| {algo} | {j['env_steps_per_s_per_seed']:,.0f} | {c['env_steps_per_s_per_seed']:,.0f} | "
                         f"{c['env_steps_per_s_per_seed'] / j['env_steps_per_s_per_seed']:.2f}x | "
                         f"{j['compile_s']:.1f} | {j['final_return_mean']:.2f} | "
                         f"{c['final_return_iqm']['iqm']:.2f} |")
    else:
        lines += ["", "JaxMARL's Q-learning scripts were not run beside these rows (no `--jaxmarl`)."]
    path = ROOT / "benchmarks" / "results" / "q_throughput.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2))
    write_section("q_throughput", "\n".join(lines))


if __name__ == "__main__":
    main()
