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

Each row is one seed trained for the whole updates that fit in the budget (one
compiled chunk, so exactly that many steps: JaxMARL's `TOTAL_TIMESTEPS // batch`),
timed like train_throughput.py (compile apart from the steady state; the
steady-state time includes acting, replay writes and sampling, and every
gradient step). Returns are per-agent episode returns of the greedy policy over
32 evaluation episodes. Beside JaxMARL, each GRU row and its JaxMARL peer are
trained in turn, `--repeats` times (coplay, JaxMARL, coplay, JaxMARL, ...), and a
pair whose steps differ is refused; coplay / JaxMARL is the median of the
per-repeat ratios. Results go to benchmarks/results/q_throughput.json, then
BENCHMARKS.md (benchmarks/page.py)."""

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
from _common import (  # noqa: E402
    RESULTS as RESULTS_DIR,
)
from _common import (
    fmt_ratio,
    jaxmarl_imports,
    median,
    needs_rerun,
    paired,
    regenerate_page,
    same_budget,
    stamp,
    table,
    timed_run,
    version,
    whole_updates,
    write_results,
)

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
RESULTS = "q_throughput.json"
COMMAND = "python benchmarks/q_throughput.py --only spread --jaxmarl PATH/TO/JaxMARL/baselines/QLearning"


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


def coplay_row(env: str, algo: str, label: str, extra: list[str], budget: int) -> dict:
    base = [f"algo={algo}", *ENVS[env], *extra, "seeds=1", "eval_episodes=32"]
    overrides = base + whole_updates(base, budget)
    r = timed_run(overrides)
    r.pop("updates")        # the per-update curve: not used here, and most of the file's size
    c = parse_overrides(overrides).algo_config
    grad_sps = r["env_steps_per_s_per_seed"] / c.steps_per_update * c.grad_steps
    r.update({"env": env, "algo": algo, "network": label, "grad_steps_per_s": grad_sps, **stamp()})
    print(f"{env} {algo} {label}: {r['env_steps_per_seed']:,} steps, {r['env_steps_per_s_per_seed']:,.0f} "
          f"env-steps/s, return {r['final_return_iqm']['iqm']:.2f}", flush=True)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=300_000)
    ap.add_argument("--only", choices=tuple(ENVS))
    ap.add_argument("--jaxmarl", type=Path, help="a JaxMARL checkout's baselines/QLearning directory")
    ap.add_argument("--repeats", type=int, default=2, help="rounds of each GRU row and its JaxMARL peer, in turn")
    args = ap.parse_args()
    results = {**stamp(), "budget": args.budget, "rows": [], "pairs": []}
    path = RESULTS_DIR / RESULTS
    if args.only and path.exists():       # the other environment's rows of an earlier run of this script, kept
        old = json.loads(path.read_text())
        if old.get("pairs") is not None and old.get("budget") == args.budget:
            results["rows"] = [r for r in old["rows"] if r["env"] != args.only]
    for env in ENVS:
        if args.only and env != args.only:
            continue
        for algo, label, extra in ROWS:
            if args.jaxmarl and env == "spread" and algo in JAXMARL_SCRIPTS and extra[:len(JAXMARL_RNN_MPE)] == \
                    JAXMARL_RNN_MPE:
                continue        # trained below, in turn with JaxMARL's script
            results["rows"].append(coplay_row(env, algo, label, extra, args.budget))
    if args.jaxmarl:
        results["stand_ins"] = jaxmarl_imports(args.jaxmarl)
        import jaxmarl

        results["jaxmarl_version"] = getattr(jaxmarl, "__version__", None) or version("jaxmarl") or "from a checkout"
        for algo, label, extra in ROWS:
            if algo not in JAXMARL_SCRIPTS or extra[:len(JAXMARL_RNN_MPE)] != JAXMARL_RNN_MPE:
                continue
            pair = {"algo": algo, "coplay": [], "jaxmarl": []}
            for _ in range(args.repeats):
                c = coplay_row("spread", algo, label, extra, args.budget)
                j = _jaxmarl_row(args.jaxmarl, JAXMARL_SCRIPTS[algo], args.budget)
                print(f"jaxmarl {j['script']}: {j['env_steps_per_seed']:,} steps, {j['env_steps_per_s_per_seed']:,.0f} "
                      f"env-steps/s, return {j['final_return_mean']:.2f}", flush=True)
                same_budget(f"coplay {algo}", c["env_steps_per_seed"], f"JaxMARL {j['script']}",
                            j["env_steps_per_seed"])
                pair["coplay"].append(c)
                pair["jaxmarl"].append(j)
            pair["ratio"] = paired([c["env_steps_per_s_per_seed"] for c in pair["coplay"]],
                                   [j["env_steps_per_s_per_seed"] for j in pair["jaxmarl"]])
            results["pairs"].append(pair)
    write_results("q_throughput", results)
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------


def section(data: dict) -> str:
    paired_algos = {p["algo"] for p in data.get("pairs") or []}
    rows = [r for r in data["rows"] if not (r["env"] == "spread" and r["network"].startswith("GRU")
                                            and r["algo"] in paired_algos)]      # those are in the pairs' table
    envs = sorted({r["env"] for r in data["rows"]})
    command = ("python benchmarks/q_throughput.py"
               + (f" --budget {data['budget']}" if data["budget"] != 300_000 else "")
               + (f" --only {envs[0]}" if len(envs) == 1 else "") + (" --jaxmarl ..." if data.get("pairs") or
                                                                     data.get("jaxmarl") else "")
               + (f" --repeats {data['pairs'][0]['ratio']['n']}" if data.get("pairs") else ""))
    steps = ", ".join(f"{n:,}" for n in sorted({r["env_steps_per_seed"] for r in data["rows"]}))
    lines = ["## Q-learning throughput, and beside JaxMARL's Q-learning scripts", "",
             f"`{command}` on {data['machine']}. One seed, "
             f"{data['budget']:,} environment steps asked ({steps} run), coplay's Q defaults unless noted (16 envs x "
             "8 steps per update, 2 gradient steps of 64 windows, MLP 2x64 relu). The GRU rows use JaxMARL's "
             "`ql_rnn_mpe.yaml` (Dense 64, GRU 64, 8 envs x 26 steps per update, one gradient step on 32 windows of "
             "26 steps, lr 0.005, gamma 0.9, target every 200 steps). Return: per-agent episode return of the greedy "
             "policy, 32 episodes.", ""]
    dates = sorted({r.get("date", "?") for r in rows})
    if len(dates) > 1:
        lines[-2] += " The rows come from runs of " + ", ".join(dates) + " (each environment's rows from one run)."
    lines += table(["env", "algo", "agent network", "env steps run", "env-steps/s", "gradient steps/s", "train s",
                    "compile s", "return"],
                   [[r["env"], r["algo"], r["network"], f"{r['env_steps_per_seed']:,}",
                     f"{r['env_steps_per_s_per_seed']:,.0f}", f"{r['grad_steps_per_s']:,.0f}", f"{r['train_s']:.1f}",
                     f"{r['compile_s']:.1f}", f"{r['final_return_iqm']['iqm']:.2f}"] for r in rows])
    if data.get("pairs"):
        lines += ["", f"Beside JaxMARL {data.get('jaxmarl_version') or ''} (its `baselines/QLearning` scripts, MPE "
                  "simple-spread, the same sizes and steps, in-training tests off; JaxMARL uses RAdam where coplay "
                  "uses Adam), each pair trained in turn, coplay first; medians over the repeats, the ratio's range "
                  "in brackets:", ""]
        body = []
        for p in data["pairs"]:
            c, j = p["coplay"], p["jaxmarl"]
            body.append([p["algo"], f"{j[0]['env_steps_per_seed']:,}",
                         f"{median([x['env_steps_per_s_per_seed'] for x in j]):,.0f}",
                         f"{median([x['env_steps_per_s_per_seed'] for x in c]):,.0f}", fmt_ratio(p["ratio"], "repeats"),
                         f"{median([x['final_return_mean'] for x in j]):.2f}",
                         f"{median([x['final_return_iqm']['iqm'] for x in c]):.2f}"])
        lines += table(["algo", "env steps", "JaxMARL env-steps/s", "coplay env-steps/s", "coplay / JaxMARL",
                        "JaxMARL return", "coplay return"], body)
        if data.get("stand_ins"):
            lines += ["", "Imports stood in for (JaxMARL's, absent here): " + "; ".join(data["stand_ins"]) + "."]
    elif data.get("jaxmarl"):
        jm_steps = ", ".join(f"{j['env_steps_per_seed']:,}" for j in data["jaxmarl"])
        gru = ", ".join(f"{r['env_steps_per_seed']:,}" for r in rows
                        if r["env"] == "spread" and r["network"].startswith("GRU"))
        lines += ["", f"JaxMARL's `iql_rnn.py` and `qmix_rnn.py` ran in the same invocation, but on {jm_steps} env "
                  f"steps where coplay's GRU rows ran {gru} (coplay's run was rounded to a second chunk), and after "
                  "all of coplay's rows rather than in turn with them; their speeds and returns are not compared here.",
                  "", needs_rerun("the budgets differ and the libraries were not timed in turn", COMMAND)]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    if data.get("pairs"):
        return [{"claim": f"recurrent {p['algo'].upper()} training env-steps/s beside JaxMARL's "
                          f"`{JAXMARL_SCRIPTS[p['algo']]}.py`",
                 "workload": f"spread, JaxMARL's MPE config, {p['coplay'][0]['env_steps_per_seed']:,} steps",
                 "ratio": fmt_ratio(p["ratio"], "repeats"), "machine": data["machine"]} for p in data["pairs"]]
    if data.get("jaxmarl"):
        gru = max(r["env_steps_per_seed"] for r in data["rows"] if r["network"].startswith("GRU"))
        jm = max(j["env_steps_per_seed"] for j in data["jaxmarl"])
        return [{"claim": "recurrent IQL and QMIX training beside JaxMARL's Q-learning scripts",
                 "workload": "spread, JaxMARL's MPE config",
                 "ratio": f"budgets differed ({gru:,} vs {jm:,} steps): needs a rerun", "machine": data["machine"]}]
    return []


if __name__ == "__main__":
    main()
