"""What this machine allows a PPO update and a recurrent Q update at JaxMARL's shapes, and coplay's and
JaxMARL's share of it.

    python benchmarks/ceiling.py --jaxmarl PATH/TO/JaxMARL   # 5 interleaved repeats, JaxMARL's rows too
    python benchmarks/ceiling.py --repeats 2 --no-write       # without --jaxmarl: coplay's rows only

The ceiling: a minimal PPO learning phase written here with nothing but JAX and
optax, at the shapes JaxMARL's `ippo_ff_mpe.yaml` sets for spread (16 environments
x 128 steps x 3 agents: 6,144 samples of spread's 18 observation features;
actor and critic MLPs of two 64-unit tanh layers; 4 epochs x 4 shuffled
minibatches of Adam on the clipped surrogate with a clipped value loss,
normalised advantages and an entropy bonus). No environment, no GAE, no
logging: what a PPO update of these shapes cannot do without. Its FLOPs are
XLA's count (`cost_analysis`) of one compiled minibatch step times the 16 steps
(XLA counts a loop's body once, so a whole update's program undercounts), its
rate the achieved FLOP/s.

coplay: IPPO on spread at the same sizes and network (`algo.num_envs=16
algo.rollout_len=128 algo.epochs=4 algo.minibatches=4 algo.hidden_size=64
algo.num_layers=2 algo.activation=tanh algo.clip_value=true
algo.normalize_advantages=true algo.agent_id=false`, JaxMARL's 26-step episodes),
a compiled chunk of `--updates` whole updates (the rollout of 2,048 environment
steps, GAE and the same learning phase) as `coplay train` compiles it. A share =
the minimal learning phase's time / a library's time for its whole update: 100%
would be the whole update (the environment, its rollout and GAE included) in the
time the bare learning phase takes.

The same for the recurrent Q update at JaxMARL's `ql_rnn_mpe.yaml` shapes (32
windows of 25 trained steps and one bootstrap step, JaxMARL's 26-step episodes;
3 agents sharing a Dense-64, ReLU, GRU-64, Dense network with a one-hot agent id,
a target network, double Q, Adam): the minimal update is one gradient step of
independent Q-learning on a batch of windows; coplay's is IQL's whole update
with JaxMARL's settings (the rollout of 8 environments x 26 steps, the replay
write and one gradient step). The windows' loop makes XLA count the gradient
step's body once, so its FLOPs are counted on the same step compiled with the
time loop unrolled. Where coplay's whole update is faster than this hand-written
step (a share above 100%), the step is no ceiling, and the section says so.

JaxMARL (`--jaxmarl`, a JaxMARL checkout; never committed here): its own scripts,
`baselines/IPPO/ippo_ff_mpe.py` with `config/ippo_ff_mpe.yaml` and
`baselines/QLearning/iql_rnn.py` with `config/config.yaml` + `config/alg/ql_rnn_mpe.yaml`
(what `iql_rnn.py +alg=ql_rnn_mpe` composes), each `jax.jit(jax.vmap(make_train(...)))`
for one seed, compiled ahead. A call of such a program is a whole training run
(initialisation included), so each script is compiled twice, for a and for b
updates (TOTAL_TIMESTEPS = updates x NUM_STEPS x NUM_ENVS, nothing else changed
but what is listed below), and JaxMARL's time per update is (t_b - t_a) / (b - a)
within each repeat: initialisation, compile-free dispatch and the updates both
runs share cancel. For IQL the first ~49 updates of both runs do not learn
(LEARNING_STARTS = 10,000 steps; 32 episodes stored), so a is past them and the
b - a updates between are all learning updates (checked: the runs' gradient
steps differ by exactly b - a). JaxMARL's IQL tests its greedy policy during
training (512 environments x 30 steps, 20 times per run whatever its length);
those would cancel in the difference too, and are switched off
(TEST_DURING_TRAINING=False) so that they add no noise. The IPPO script hands
every update's metrics to `wandb.log` through an `io_callback`; `wandb.log` is
replaced by a no-op, the host call stays (it is part of JaxMARL's update).

Running JaxMARL's scripts under this JAX: `PYTHONPATH` needs `distrax`, a
`tensorflow-probability` that imports under this JAX (tfp-nightly; 0.25 does
not), `dm-tree`, `gymnax`, `jaxtyping`, `omegaconf`, `hydra-core` and `flashbax`.
Two imports are stood in for at runtime when absent, and the results file lists
which were: `brax` (`jaxmarl.environments` imports its MABrax environments,
which need `brax.envs` at class definition; spread does not use it) and `wandb`
(imported at the scripts' top; replaced as above). JaxMARL's files are not changed.

Every program is timed in alternation, one call of each per repeat; medians over
repeats, and the range of the per-repeat shares. Results go to
benchmarks/results/ceiling.json; BENCHMARKS.md is written from it by
benchmarks/page.py (`section`, `claims`).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import optax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    _load_script,
    git_blob,
    ippo_dir,
    jaxmarl_config,
    jaxmarl_imports,
    paired,
    stamp,
    table,
    write_results,
)

from coplay.experiment.compiled import FEW_UPDATES, chunk_function, init_state, place, plan  # noqa: E402
from coplay.experiment.config import parse_overrides  # noqa: E402

RESULTS = "ceiling.json"
TITLE = "The update's ceiling on this machine, and coplay's and JaxMARL's share of it"
JAXMARL_EPISODE_STEPS = 26   # JaxMARL's MPE ends an episode after 26 steps; coplay's spread is given the same

ENVS, STEPS, AGENTS, OBS, ACTIONS, HIDDEN = 16, 128, 3, 18, 5, 64
EPOCHS, MINIBATCHES, LR, CLIP, ENT, VF, MAX_NORM = 4, 4, 2.5e-4, 0.2, 0.01, 0.5, 0.5
COPLAY = ["algo=ippo", "env=spread", f"algo.num_envs={ENVS}", f"algo.rollout_len={STEPS}", f"algo.epochs={EPOCHS}",
          f"algo.minibatches={MINIBATCHES}", f"algo.hidden_size={HIDDEN}", "algo.num_layers=2",
          "algo.activation=tanh", "algo.clip_value=true", "algo.normalize_advantages=true", "algo.agent_id=false",
          f"algo.lr={LR}", f"algo.ent_coef={ENT}", f"algo.vf_coef={VF}", f"algo.max_grad_norm={MAX_NORM}",
          f"env.max_steps={JAXMARL_EPISODE_STEPS}", "seeds=1", "progress=false"]


def flops(compiled) -> float:
    """XLA's FLOP count of a compiled program (a loop's body counted once)."""
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost["flops"])


# ----- the minimal update -------------------------------------------------------------------------


def mlp(params: list, x: jax.Array) -> jax.Array:
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def init_mlp(key: jax.Array, sizes: list[int]) -> list:
    keys = jax.random.split(key, len(sizes) - 1)
    return [(jax.random.normal(k, (i, o)) / jnp.sqrt(i), jnp.zeros(o)) for k, i, o in zip(keys, sizes, sizes[1:])]


def minimal_update(optimizer):
    """`(update, step)`: `update(params, opt_state, batch, key) -> (params, opt_state)`, EPOCHS x
    MINIBATCHES Adam steps, and `step(carry, minibatch)`, one of them."""

    def loss(params, mb):
        logits = jax.nn.log_softmax(mlp(params["actor"], mb["obs"]))
        logp = jnp.take_along_axis(logits, mb["action"][:, None], axis=-1)[:, 0]
        ratio = jnp.exp(logp - mb["logp"])
        adv = (mb["adv"] - mb["adv"].mean()) / (mb["adv"].std() + 1e-8)
        actor = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - CLIP, 1 + CLIP) * adv).mean()
        value = mlp(params["critic"], mb["obs"])[:, 0]
        clipped = mb["value"] + jnp.clip(value - mb["value"], -CLIP, CLIP)
        critic = 0.5 * jnp.maximum((value - mb["target"]) ** 2, (clipped - mb["target"]) ** 2).mean()
        entropy = -(jnp.exp(logits) * logits).sum(-1).mean()
        return actor + VF * critic - ENT * entropy

    def step(carry, mb):
        params, opt_state = carry
        grads = jax.grad(loss)(params, mb)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), None

    def update(params, opt_state, batch, key):
        n = batch["obs"].shape[0]

        def epoch(carry, k):
            order = jax.random.permutation(k, n)
            mbs = jax.tree.map(lambda x: x[order].reshape(MINIBATCHES, n // MINIBATCHES, *x.shape[1:]), batch)
            return jax.lax.scan(step, carry, mbs)[0], None

        return jax.lax.scan(epoch, (params, opt_state), jax.random.split(key, EPOCHS))[0]

    return update, step


def minimal_program():
    k = jax.random.split(jax.random.PRNGKey(0), 8)
    n = ENVS * STEPS * AGENTS
    params = {"actor": init_mlp(k[0], [OBS, HIDDEN, HIDDEN, ACTIONS]),
              "critic": init_mlp(k[1], [OBS, HIDDEN, HIDDEN, 1])}
    batch = {"obs": jax.random.normal(k[2], (n, OBS)), "action": jax.random.randint(k[3], (n,), 0, ACTIONS),
             "logp": jnp.full((n,), -jnp.log(ACTIONS)), "adv": jax.random.normal(k[4], (n,)),
             "value": jax.random.normal(k[5], (n,)), "target": jax.random.normal(k[6], (n,))}
    optimizer = optax.chain(optax.clip_by_global_norm(MAX_NORM), optax.adam(LR))
    update, step = minimal_update(optimizer)
    args = (params, optimizer.init(params), batch, k[7])
    mb = jax.tree.map(lambda x: x[:n // MINIBATCHES], batch)
    per_step = flops(jax.jit(step).lower((args[0], args[1]), mb).compile())
    return jax.jit(update).lower(*args).compile(), args, per_step * EPOCHS * MINIBATCHES


# ----- the recurrent Q update ---------------------------------------------------------------------------

# JaxMARL's ql_rnn_mpe.yaml: NUM_ENVS 8, NUM_STEPS 26 (one whole episode per env and update), windows of
# BUFFER_BATCH_SIZE 32 whole episodes (26 steps: 25 trained, the last one bootstraps), NUM_EPOCHS 1 gradient step
# per update, BUFFER_SIZE 5,000 episodes (130,000 steps), TARGET_UPDATE_INTERVAL 200 updates, EPS_DECAY 0.1.
Q_ENVS, Q_ROLLOUT, Q_BATCH, Q_TRAINED, Q_GAMMA, Q_LR, Q_NORM = 8, 26, 32, 25, 0.9, 0.005, 25.0
Q_COPLAY = ["algo=iql", "env=spread", "algo.recurrent=true", "algo.num_layers=1", f"algo.hidden_size={HIDDEN}",
            f"algo.num_envs={Q_ENVS}", f"algo.rollout_len={Q_ROLLOUT}", f"algo.seq_len={Q_TRAINED}",
            f"algo.batch_size={Q_BATCH}", "algo.grad_steps=1", "algo.buffer_size=130000", "algo.learning_starts=0",
            f"algo.lr={Q_LR}", f"algo.gamma={Q_GAMMA}", f"algo.max_grad_norm={Q_NORM}", "algo.target_interval=200",
            "algo.eps_decay=0.1", f"env.max_steps={JAXMARL_EPISODE_STEPS}", "seeds=1", "progress=false"]


def q_program():
    """`(compiled step, args, FLOPs per step)` of the minimal recurrent IQL gradient step."""
    n_in, length = OBS + AGENTS, Q_TRAINED + 1
    k = jax.random.split(jax.random.PRNGKey(1), 12)
    g = lambda kk, i, o: jax.random.normal(kk, (i, o)) / jnp.sqrt(i)  # noqa: E731
    params = {"embed": (g(k[0], n_in, HIDDEN), jnp.zeros(HIDDEN)),
              "gru": {"ir": g(k[1], HIDDEN, HIDDEN), "iz": g(k[2], HIDDEN, HIDDEN), "in": g(k[3], HIDDEN, HIDDEN),
                      "hr": g(k[4], HIDDEN, HIDDEN), "hz": g(k[5], HIDDEN, HIDDEN), "hn": g(k[6], HIDDEN, HIDDEN),
                      "br": jnp.zeros(HIDDEN), "bz": jnp.zeros(HIDDEN), "bn": jnp.zeros(HIDDEN),
                      "bhn": jnp.zeros(HIDDEN)},
              "head": (g(k[7], HIDDEN, ACTIONS), jnp.zeros(ACTIONS))}
    b = Q_BATCH * AGENTS
    w = {"obs": jax.random.normal(k[8], (length, b, n_in)), "action": jax.random.randint(k[9], (length, b), 0, ACTIONS),
         "reward": jax.random.normal(k[10], (length, b)), "done": jnp.zeros((length, b), bool),
         "reset": jnp.zeros((length, b), bool)}
    optimizer = optax.chain(optax.clip_by_global_norm(Q_NORM), optax.adam(Q_LR))

    def make_step(unroll):
        def q_values(params, w):
            # what needs no recurrence runs on every step at once, outside the loop: the embedding, the
            # GRU's input projections and the head
            g = params["gru"]
            e = jax.nn.relu(w["obs"] @ params["embed"][0] + params["embed"][1])               # [L, B, H]
            xr, xz, xn = e @ g["ir"] + g["br"], e @ g["iz"] + g["bz"], e @ g["in"] + g["bn"]

            def body(h, x):
                r_in, z_in, n_in, reset = x
                h = jnp.where(reset[:, None], 0.0, h)
                r = jax.nn.sigmoid(r_in + h @ g["hr"])
                z = jax.nn.sigmoid(z_in + h @ g["hz"])
                n = jnp.tanh(n_in + r * (h @ g["hn"] + g["bhn"]))
                h = (1.0 - z) * n + z * h
                return h, h

            hs = jax.lax.scan(body, jnp.zeros((b, HIDDEN)), (xr, xz, xn, w["reset"]), unroll=unroll)[1]
            return hs @ params["head"][0] + params["head"][1]

        def loss(params, target, w):
            q, q_target = q_values(params, w), jax.lax.stop_gradient(q_values(target, w))
            taken = jnp.take_along_axis(q[:-1], w["action"][:-1, :, None], axis=-1)[..., 0]
            best = jnp.argmax(q[1:], axis=-1)                                             # double Q
            nxt = jnp.take_along_axis(q_target[1:], best[..., None], axis=-1)[..., 0]
            y = w["reward"][:-1] + Q_GAMMA * (1.0 - w["done"][:-1]) * nxt
            return jnp.mean((taken - jax.lax.stop_gradient(y)) ** 2)

        def step(params, target, opt_state, w):
            grads = jax.grad(loss)(params, target, w)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state

        return step

    args = (params, params, optimizer.init(params), w)
    per_step = flops(jax.jit(make_step(True)).lower(*args).compile())
    return jax.jit(make_step(1)).lower(*args).compile(), args, per_step


def coplay_program(updates: int, overrides: list[str] = COPLAY):
    per_update = parse_overrides(overrides).algo_config.steps_per_update
    exp = parse_overrides(overrides + [f"total_steps={per_update * updates * (FEW_UPDATES + 1)}",
                                       f"chunk_steps={per_update * updates}"])
    p = plan(exp)
    assert p.updates_per_chunk == updates and p.num_chunks * p.updates_per_chunk > FEW_UPDATES  # optimised build
    state = place(p, init_state(p))
    compiled = chunk_function(p, state).lower(state).compile()
    p.env.close()
    return compiled, state


# ----- JaxMARL's own scripts ------------------------------------------------------------------------------


class _Discard:
    """Stands in for `wandb` in ippo_ff_mpe.py: every update's `io_callback` still reaches the host, and
    `log` drops what it brings."""

    def log(self, metric: dict) -> None:
        pass


def _check(name: str, config: dict, expected: dict) -> None:
    wrong = {k: (config[k], v) for k, v in expected.items() if config[k] != v}
    if wrong:
        raise SystemExit(f"JaxMARL's {name} differs from the shapes this script compares at (JaxMARL's value, "
                         f"this script's): {wrong}")


def jaxmarl_ppo_programs(path: Path, updates: tuple[int, int], keys: jax.Array) -> tuple[dict, dict]:
    """ippo_ff_mpe's whole training run compiled for each count of updates: ({updates: program}, facts)."""
    d = ippo_dir(path)
    mod = _load_script(d)
    mod.wandb = _Discard()
    programs = {}
    for n in updates:
        config = jaxmarl_config(d)
        _check("ippo_ff_mpe.yaml", config, {"NUM_ENVS": ENVS, "NUM_STEPS": STEPS, "UPDATE_EPOCHS": EPOCHS,
                                            "NUM_MINIBATCHES": MINIBATCHES, "LR": LR, "CLIP_EPS": CLIP,
                                            "ENT_COEF": ENT, "VF_COEF": VF, "MAX_GRAD_NORM": MAX_NORM,
                                            "ACTIVATION": "tanh", "ENV_NAME": "MPE_simple_spread_v3"})
        config.update(TOTAL_TIMESTEPS=n * STEPS * ENVS, NUM_SEEDS=1)
        programs[n] = jax.jit(jax.vmap(mod.make_train(config))).lower(keys).compile()
        assert config["NUM_UPDATES"] == n, config["NUM_UPDATES"]
    facts = {"script": "baselines/IPPO/ippo_ff_mpe.py", "blob": git_blob(d / "ippo_ff_mpe.py"),
             "config": "baselines/IPPO/config/ippo_ff_mpe.yaml", "changed": {"TOTAL_TIMESTEPS": "updates x 2,048",
                                                                             "NUM_SEEDS": 1}}
    return programs, facts


def iql_dir(path: Path) -> Path:
    """Accept the checkout or its baselines/QLearning directory."""
    for d in (path, path / "baselines" / "QLearning"):
        if (d / "iql_rnn.py").exists() and (d / "config" / "alg" / "ql_rnn_mpe.yaml").exists():
            return d
    raise SystemExit(f"--jaxmarl {path}: no iql_rnn.py with config/alg/ql_rnn_mpe.yaml there or in "
                     "baselines/QLearning below it")


def iql_config(d: Path) -> dict:
    """What `iql_rnn.py +alg=ql_rnn_mpe` runs with: hydra puts the alg file under `alg` of config.yaml,
    and `single_run` merges it flat ({**config, **config["alg"]})."""
    from omegaconf import OmegaConf

    config = OmegaConf.to_container(OmegaConf.merge(OmegaConf.load(d / "config" / "config.yaml"),
                                                    {"alg": OmegaConf.load(d / "config" / "alg" / "ql_rnn_mpe.yaml")}))
    return {**config, **config["alg"]}


def jaxmarl_q_programs(path: Path, updates: tuple[int, int], keys: jax.Array) -> tuple[dict, dict]:
    """iql_rnn's whole training run compiled for each count of updates: ({updates: program}, facts)."""
    d = iql_dir(path)
    if str(d) not in sys.path:
        sys.path.insert(0, str(d))
    mod = importlib.import_module("iql_rnn")
    programs = {}
    for n in updates:
        config = iql_config(d)
        _check("ql_rnn_mpe.yaml", config, {"NUM_ENVS": Q_ENVS, "NUM_STEPS": Q_ROLLOUT, "BUFFER_BATCH_SIZE": Q_BATCH,
                                           "HIDDEN_SIZE": HIDDEN, "NUM_EPOCHS": 1, "LR": Q_LR, "GAMMA": Q_GAMMA,
                                           "MAX_GRAD_NORM": Q_NORM, "TARGET_UPDATE_INTERVAL": 200, "TAU": 1.0,
                                           "BUFFER_SIZE": 5000, "ENV_NAME": "MPE_simple_spread_v3",
                                           "WANDB_MODE": "disabled"})
        config.update(TOTAL_TIMESTEPS=n * Q_ROLLOUT * Q_ENVS, NUM_SEEDS=1, TEST_DURING_TRAINING=False)
        env, _ = mod.env_from_config(copy.deepcopy(config))
        programs[n] = jax.jit(jax.vmap(mod.make_train(config, env))).lower(keys).compile()
        assert config["NUM_UPDATES"] == n, config["NUM_UPDATES"]
    facts = {"script": "baselines/QLearning/iql_rnn.py", "blob": git_blob(d / "iql_rnn.py"),
             "config": "baselines/QLearning/config/config.yaml + config/alg/ql_rnn_mpe.yaml",
             "changed": {"TOTAL_TIMESTEPS": "updates x 208", "NUM_SEEDS": 1, "TEST_DURING_TRAINING": False}}
    return programs, facts


# ----- the run --------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--updates", type=int, default=5, help="coplay PPO updates per timed chunk")
    ap.add_argument("--q-updates", type=int, default=20, help="coplay IQL updates per timed chunk")
    ap.add_argument("--jaxmarl", type=Path, help="a JaxMARL checkout: time its ippo_ff_mpe.py and iql_rnn.py too")
    ap.add_argument("--jaxmarl-ppo-updates", type=int, nargs=2, default=(2, 22), metavar=("A", "B"),
                    help="the two run lengths of JaxMARL's IPPO, in updates")
    ap.add_argument("--jaxmarl-q-updates", type=int, nargs=2, default=(100, 300), metavar=("A", "B"),
                    help="the two run lengths of JaxMARL's IQL, in updates (A past its ~49 updates without learning)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    for a, b in (args.jaxmarl_ppo_updates, args.jaxmarl_q_updates):
        if not 0 < a < b:
            raise SystemExit(f"JaxMARL's run lengths {a}, {b}: need 0 < A < B")
    load_before = os.getloadavg()

    minimal, m_args, m_flops = minimal_program()                          # FLOPs per update
    chunk, state = coplay_program(args.updates)
    q_min, q_args, q_flops = q_program()
    q_chunk, q_state = coplay_program(args.q_updates, Q_COPLAY)
    states = {"coplay": state, "coplay_q": q_state}
    programs = {"minimal": lambda: minimal(*m_args), "minimal_q": lambda: q_min(*q_args)}
    chunks = {"coplay": chunk, "coplay_q": q_chunk}
    jm = None
    if args.jaxmarl:
        patches = jaxmarl_imports(args.jaxmarl.resolve())
        import jaxmarl

        keys = jax.random.split(jax.random.PRNGKey(0), 1)
        ppo_programs, ppo_facts = jaxmarl_ppo_programs(args.jaxmarl.resolve(), tuple(args.jaxmarl_ppo_updates), keys)
        q_programs, q_facts = jaxmarl_q_programs(args.jaxmarl.resolve(), tuple(args.jaxmarl_q_updates), keys)
        for label, progs in (("jaxmarl", ppo_programs), ("jaxmarl_q", q_programs)):
            for n, prog in progs.items():
                programs[f"{label}_{n}"] = (lambda prog=prog: prog(keys))
        jm = {"path": str(args.jaxmarl), "version": getattr(jaxmarl, "__version__", None), "patches": patches,
              "ppo": {**ppo_facts, "updates": list(args.jaxmarl_ppo_updates)},
              "q": {**q_facts, "updates": list(args.jaxmarl_q_updates)}}
    order = ["minimal", "coplay", *(f"jaxmarl_{n}" for n in (args.jaxmarl_ppo_updates if jm else ())),
             "minimal_q", "coplay_q", *(f"jaxmarl_q_{n}" for n in (args.jaxmarl_q_updates if jm else ()))]
    per_call = {name: {"coplay": args.updates, "coplay_q": args.q_updates}.get(name, 1) for name in order}

    def call(name):
        if name in programs:
            return jax.block_until_ready(programs[name]())
        states[name], metrics = chunks[name](states[name])
        return jax.block_until_ready((states[name], metrics))

    outs = {name: call(name) for name in order}        # warm
    if jm:   # every update between JaxMARL's two IQL runs learns: their gradient steps differ by b - a
        a, b = args.jaxmarl_q_updates
        grad = {n: int(outs[f"jaxmarl_q_{n}"]["runner_state"][0].grad_steps[0]) for n in (a, b)}
        jm["q"]["grad_steps"] = {str(n): g for n, g in grad.items()}
        if grad[b] - grad[a] != b - a or grad[a] < 1:
            raise SystemExit(f"JaxMARL's IQL runs of {a} and {b} updates took {grad[a]} and {grad[b]} gradient "
                             "steps: not one per update between them; raise --jaxmarl-q-updates' A")
    del outs
    # wall time (the figures), and the process's CPU time beside it: on a machine other processes share,
    # waiting for a core inflates the first and hardly the second (these programs run on one thread)
    times: dict[str, list[float]] = {k: [] for k in order}
    cpu: dict[str, list[float]] = {k: [] for k in order}
    for _ in range(args.repeats):
        for name in order:
            t, c = time.perf_counter(), time.process_time()
            call(name)
            times[name].append((time.perf_counter() - t) / per_call[name])
            cpu[name].append((time.process_time() - c) / per_call[name])
    if jm:   # JaxMARL's per update, in each repeat: the difference of its two runs over their difference in updates
        for label, (a, b) in (("jaxmarl", args.jaxmarl_ppo_updates), ("jaxmarl_q", args.jaxmarl_q_updates)):
            for d in (times, cpu):
                d[label] = [(tb - ta) / (b - a) for ta, tb in zip(d[f"{label}_{a}"], d[f"{label}_{b}"])]

    argv = ["PATH/TO/JaxMARL" if a == str(args.jaxmarl) else a for a in sys.argv[1:]]
    result = {**stamp(), "command": " ".join(["python benchmarks/ceiling.py", *argv]), "repeats": args.repeats,
              "cores": os.cpu_count(), "load_average_1min": [load_before[0], os.getloadavg()[0]],
              "updates_per_chunk": args.updates, "q_updates_per_chunk": args.q_updates,
              "seconds_per_update": {k: v for k, v in times.items() if not k[-1].isdigit()},
              "jaxmarl_seconds_per_run": {k: v for k, v in times.items() if k[-1].isdigit()},
              "cpu_seconds_per_update": {k: v for k, v in cpu.items() if not k[-1].isdigit()},
              "jaxmarl_cpu_seconds_per_run": {k: v for k, v in cpu.items() if k[-1].isdigit()},
              "shapes": {"ppo": {"envs": ENVS, "steps": STEPS, "agents": AGENTS, "hidden": HIDDEN, "epochs": EPOCHS,
                                 "minibatches": MINIBATCHES},
                         "q": {"envs": Q_ENVS, "rollout": Q_ROLLOUT, "windows": Q_BATCH, "trained": Q_TRAINED,
                               "agents": AGENTS, "hidden": HIDDEN}},
              "coplay_overrides": {"ppo": COPLAY, "q": Q_COPLAY},
              "ppo": {"learning_flops_per_update": m_flops}, "q": {"gradient_step_flops": q_flops},
              "jaxmarl": jm}
    result["ppo"].update(shares(result, "ppo"))
    result["q"].update(shares(result, "q"))
    print(section(result))
    if not args.no_write:
        write_results("ceiling", result)


# ----- the page (from the results alone) -----------------------------------------------------------------


def shares(data: dict, row: str) -> dict:
    """A row's figures from the per-repeat times: each library's share of the minimal update (ratio of the
    medians) with the range of the per-repeat ratios, the ceiling's rate, env-steps/s."""
    t = data["seconds_per_update"]
    suffix = "" if row == "ppo" else "_q"
    minimal = t["minimal" + suffix]
    s = data.get("shapes", {}).get(row, {})
    env_steps = s.get("envs", ENVS if row == "ppo" else Q_ENVS) * s.get(
        "steps" if row == "ppo" else "rollout", STEPS if row == "ppo" else Q_ROLLOUT)
    flops = data[row].get("learning_flops_per_update" if row == "ppo" else "gradient_step_flops")
    out = {"minimal_s": statistics.median(minimal), "env_steps_per_update": env_steps,
           "ceiling_flop_per_s": flops / statistics.median(minimal),
           "ceiling_env_steps_per_s": env_steps / statistics.median(minimal)}
    cpu = data.get("cpu_seconds_per_update", {})
    for lib in ("coplay", "jaxmarl"):
        if lib + suffix not in t:
            continue
        x = t[lib + suffix]
        out.update({f"{lib}_s": statistics.median(x), f"{lib}_share": statistics.median(minimal) / statistics.median(x),
                    f"{lib}_share_per_repeat": paired(minimal, x),
                    f"{lib}_env_steps_per_s": env_steps / statistics.median(x)})
        if lib + suffix in cpu:
            cm, cx = cpu["minimal" + suffix], cpu[lib + suffix]
            out.update({f"{lib}_cpu_share": statistics.median(cm) / statistics.median(cx),
                        f"{lib}_cpu_share_per_repeat": paired(cm, cx)})
    return out


def _share(f: dict, lib: str, kind: str = "") -> str:
    if f"{lib}{kind}_share" not in f:
        return "not run"
    r = f[f"{lib}{kind}_share_per_repeat"]
    return f"{100 * f[f'{lib}{kind}_share']:.0f}% ({100 * r['min']:.0f}-{100 * r['max']:.0f}%)"


def _loaded(data: dict) -> bool:
    """Whether other processes wanted more than the machine's cores during the run."""
    load, cores = data.get("load_average_1min"), data.get("cores") or int(data["machine"].split()[0])
    return bool(load and cores and max(load) > cores)


def _read(f: dict, lib: str) -> float | None:
    """The share to read: in CPU time where measured (robust to other processes), else in wall time."""
    return f.get(f"{lib}_cpu_share", f.get(f"{lib}_share"))


def _faster_than_step(q: dict) -> list[str]:
    return [name for lib, name in (("coplay", "coplay"), ("jaxmarl", "JaxMARL")) if (_read(q, lib) or 0) > 1]


def section(data: dict) -> str:
    ppo, q = shares(data, "ppo"), shares(data, "q")
    jm = data.get("jaxmarl")
    s = {**{"envs": ENVS, "steps": STEPS, "agents": AGENTS, "hidden": HIDDEN, "epochs": EPOCHS,
            "minibatches": MINIBATCHES}, **data.get("shapes", {}).get("ppo", {})}
    sq = {**{"envs": Q_ENVS, "rollout": Q_ROLLOUT, "windows": Q_BATCH, "trained": Q_TRAINED},
          **data.get("shapes", {}).get("q", {})}
    load = data.get("load_average_1min")
    ms = lambda x: f"{x * 1e3:,.1f}"  # noqa: E731
    lines = [
        f"## {TITLE}", "",
        f"`{data.get('command', 'python benchmarks/ceiling.py')}` on {data['machine']}"
        + (f", {data['date']}, coplay {data['commit']}" if "date" in data else "")
        + (f"; the machine's 1-minute load average was {load[0]:.1f} before and {load[1]:.1f} after (other "
           "processes shared its cores)" if load else "") + ". "
        "The ceiling of each update is a minimal one written with JAX and optax alone at JaxMARL's shapes, which "
        "does only what the update cannot do without; a library's share is that minimal update's time over the "
        "library's whole update's (its environment steps, rollout and replay included). All programs are timed "
        f"in alternation, one call of each per repeat, {data['repeats']} repeats; times are medians, shares the "
        "ratio of medians with the range of the per-repeat ratios in brackets.", "",
        *table(["update", "minimal (the ceiling), ms", "its GFLOP/s", "coplay's whole update, ms", "coplay's share",
                "JaxMARL's whole update, ms", "JaxMARL's share"],
               [["PPO, JaxMARL's IPPO shapes", ms(ppo["minimal_s"]), f"{ppo['ceiling_flop_per_s'] / 1e9:,.1f}",
                 ms(ppo["coplay_s"]), _share(ppo, "coplay"), ms(ppo["jaxmarl_s"]) if "jaxmarl_s" in ppo else "–",
                 _share(ppo, "jaxmarl")],
                ["recurrent Q, JaxMARL's IQL shapes", ms(q["minimal_s"]), f"{q['ceiling_flop_per_s'] / 1e9:,.1f}",
                 ms(q["coplay_s"]), _share(q, "coplay"), ms(q["jaxmarl_s"]) if "jaxmarl_s" in q else "–",
                 _share(q, "jaxmarl")]]), "",
        *([f"**The machine was loaded beyond its cores during this run** (1-minute load average "
           f"{max(data['load_average_1min']):.1f}): wall times moved by up to 2x between repeats (the ranges above), "
           "so the CPU-time shares below are the ones to read.", ""] if _loaded(data) else []),
        *([f"In the process's CPU time instead of wall time (a check against the load of other processes: these "
           "programs run on one thread, so waiting for a core inflates their wall time and hardly their CPU time), "
           f"the PPO shares are coplay {_share(ppo, 'coplay', '_cpu')}, JaxMARL {_share(ppo, 'jaxmarl', '_cpu')}; "
           f"the Q shares coplay {_share(q, 'coplay', '_cpu')}, JaxMARL {_share(q, 'jaxmarl', '_cpu')}.", ""]
          if "coplay_cpu_share" in ppo else []),
        f"**PPO** at JaxMARL's `ippo_ff_mpe.yaml`: {s['envs']} environments x {s['steps']} steps x {s['agents']} "
        f"agents of spread, 2x{s['hidden']} tanh actor and critic, {s['epochs']} epochs x {s['minibatches']} "
        "minibatches of Adam on the clipped surrogate and clipped value loss. The minimal update is the learning "
        f"phase alone: {data['ppo']['learning_flops_per_update'] / 1e9:.2f} GFLOP (XLA's count of one minibatch "
        f"step times {s['epochs'] * s['minibatches']}), at the ceiling {ppo['ceiling_env_steps_per_s']:,.0f} "
        f"environment steps/s. coplay's is IPPO's whole update ({data['updates_per_chunk']} per compiled chunk), "
        f"{ppo['coplay_env_steps_per_s']:,.0f} environment steps/s."
        + (f" JaxMARL's is one update of `ippo_ff_mpe.py` itself, {ppo['jaxmarl_env_steps_per_s']:,.0f} "
           f"environment steps/s: the rollout of {ppo['env_steps_per_update']:,} environment steps (distrax's "
           "categorical), GAE, the same learning phase, and the metrics handed to the host (`wandb.log` by "
           "`io_callback`) once per update." if jm else ""), "",
        f"**Recurrent Q** at JaxMARL's `ql_rnn_mpe.yaml`: a Dense-64, ReLU, GRU-64, Dense network shared by the "
        f"agents (a one-hot agent id appended), {sq['windows']} windows of {sq['trained'] + 1} steps "
        f"({sq['trained']} trained, the last bootstraps), a target network, double Q. The minimal update is one "
        f"gradient step of independent Q-learning with Adam, {data['q']['gradient_step_flops'] / 1e9:.2f} GFLOP "
        "(counted with its time loop unrolled). coplay's is IQL's whole update with JaxMARL's settings "
        f"({sq['envs']} environments x {sq['rollout']} steps, the replay write, one gradient step on "
        f"{sq['windows']} windows sampled from 130,000 steps; {data['q_updates_per_chunk']} updates per chunk)"
        + (". JaxMARL's is one learning update of `iql_rnn.py` itself: it resets its 8 environments and plays "
           "one whole 26-step episode in each (epsilon-greedy), adds the 8 episodes to its flashbax buffer of "
           "5,000 episodes, and takes NUM_EPOCHS = 1 gradient step on 32 sampled episodes (RAdam, its optimiser, "
           "where the minimal step and coplay use Adam), copying the target network every 200 updates. Its "
           "buffer holds whole episodes, coplay's steps (coplay's windows may start anywhere and cross an "
           "episode's end)" if jm else "") + ".",
    ]
    faster = _faster_than_step(q)
    if faster:
        lines += ["", f"{' and '.join(n + chr(39) + 's' for n in faster)} whole Q update"
                      f"{'s run' if len(faster) > 1 else ' runs'} faster than the gradient step written here "
                      "alone (a share above 100%): that step is no ceiling, and the Q update's ceiling is not "
                      "established by this script; the Q row's shares compare each library with that step, not with "
                      "a ceiling."]
    if jm:
        p, qq = jm["ppo"], jm["q"]
        lines += ["", f"JaxMARL {jm.get('version') or ''} (`{p['script']}` blob {p['blob'][:10]}, `{qq['script']}` "
                      f"blob {qq['blob'][:10]}): a call of its compiled program is a whole training run, so each "
                      f"script is compiled for two lengths, IPPO {p['updates'][0]} and {p['updates'][1]} updates, "
                      f"IQL {qq['updates'][0]} and {qq['updates'][1]}, and its time per update is their difference "
                      "over the difference in updates, in each repeat (initialisation and the updates both runs "
                      "share cancel). Its IQL learns from update "
                      f"{qq['updates'][1] - qq['grad_steps'][str(qq['updates'][1])] + 1} on (LEARNING_STARTS "
                      "= 10,000 steps), so all "
                      f"{qq['updates'][1] - qq['updates'][0]} updates in the difference learn (its gradient steps "
                      f"{qq['grad_steps'][str(qq['updates'][0])]} and {qq['grad_steps'][str(qq['updates'][1])]}); "
                      "its greedy tests during training (20 per run whatever its length, which would cancel too) "
                      "are off. Nothing else in its configs is changed."
                      + (f" Stand-ins at import: {'; '.join(jm['patches'])}." if jm.get("patches") else "")]
    else:
        lines += ["", "JaxMARL's rows are left out: this run had no `--jaxmarl PATH` (a JaxMARL checkout, whose "
                      "scripts are timed beside these when given)."]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    ppo, q = shares(data, "ppo"), shares(data, "q")

    def ratio(f):
        def kind(k):
            libs = (("coplay", "coplay"), ("jaxmarl", "JaxMARL"))
            return ", ".join(f"{name} {_share(f, lib, k)}" for lib, name in libs if f"{lib}{k}_share" in f)

        if "coplay_cpu_share" not in f:
            return kind("")
        return f"CPU time: {kind('_cpu')}; wall time{' (machine loaded)' if _loaded(data) else ''}: {kind('')}"

    faster = _faster_than_step(q)
    q_claim = ("Recurrent Q update beside a hand-written IQL gradient step (no ceiling: "
               f"{' and '.join(n + chr(39) + 's' for n in faster)} whole update{'s are' if len(faster) > 1 else ' is'} "
               "faster than it)" if faster else "Recurrent Q update: share of this machine's ceiling")
    return [{"claim": "PPO update: share of this machine's ceiling", "ratio": ratio(ppo), "machine": data["machine"],
             "workload": "JaxMARL's ippo_ff_mpe.yaml shapes: spread, 16 envs x 128 steps x 3 agents, 4 epochs x 4 "
                         "minibatches, against the bare learning phase"},
            {"claim": q_claim, "ratio": ratio(q), "machine": data["machine"],
             "workload": "JaxMARL's ql_rnn_mpe.yaml shapes: spread, 8 envs x 26 steps, GRU-64, one gradient step on "
                         "32 windows of 26 steps"}]


if __name__ == "__main__":
    main()
