"""What this machine allows a PPO update of JaxMARL's IPPO shapes, and coplay's share of it.

    python benchmarks/ceiling.py                  # 5 interleaved repeats
    python benchmarks/ceiling.py --repeats 2 --no-write

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
algo.normalize_advantages=true algo.agent_id=false`), a compiled chunk of
`--updates` whole updates (the rollout of 2,048 environment steps, GAE and the
same learning phase) as `coplay train` compiles it. coplay's share = the
minimal learning phase's time / coplay's time for its whole update: 100% would
be coplay's update (the environment, its rollout and GAE included) in the time
the bare learning phase takes. Timed in alternation, one call of each per
repeat; medians.
Results go to benchmarks/results/ceiling.json and BENCHMARKS.md.

The same for the recurrent Q update at JaxMARL's `ql_rnn_mpe.yaml` shapes (32
windows of 26 trained steps and one bootstrap step, 3 agents sharing a Dense-64,
ReLU, GRU-64, Dense network with a one-hot agent id, a target network, double Q,
Adam): the minimal update is one gradient step of independent Q-learning on a
batch of windows; coplay's is IQL's whole update with JaxMARL's settings (the
rollout of 8 environments x 26 steps, the replay write and one gradient step).
The windows' loop makes XLA count the gradient step's body once, so its FLOPs
are counted on the same step compiled with the time loop unrolled. Where
coplay's whole update is faster than this hand-written step (a share above
100%), the step is no ceiling, and the table says so.

Not here yet: JaxMARL's own share (its scripts timed beside these; its
`distrax` needs a `tensorflow-probability` that does not import under this JAX).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import optax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_results, write_section  # noqa: E402
from train_throughput import machine  # noqa: E402

from coplay.experiment.compiled import FEW_UPDATES, chunk_function, init_state, place, plan  # noqa: E402
from coplay.experiment.config import parse_overrides  # noqa: E402

ENVS, STEPS, AGENTS, OBS, ACTIONS, HIDDEN = 16, 128, 3, 18, 5, 64
EPOCHS, MINIBATCHES, LR, CLIP, ENT, VF, MAX_NORM = 4, 4, 2.5e-4, 0.2, 0.01, 0.5, 0.5
COPLAY = ["algo=ippo", "env=spread", f"algo.num_envs={ENVS}", f"algo.rollout_len={STEPS}", f"algo.epochs={EPOCHS}",
          f"algo.minibatches={MINIBATCHES}", f"algo.hidden_size={HIDDEN}", "algo.num_layers=2",
          "algo.activation=tanh", "algo.clip_value=true", "algo.normalize_advantages=true", "algo.agent_id=false",
          f"algo.lr={LR}", f"algo.ent_coef={ENT}", f"algo.vf_coef={VF}", f"algo.max_grad_norm={MAX_NORM}",
          "seeds=1", "progress=false", "tensorboard=false"]


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

Q_BATCH, Q_TRAINED, Q_GAMMA, Q_LR, Q_NORM = 32, 26, 0.9, 0.005, 25.0
Q_COPLAY = ["algo=iql", "env=spread", "algo.recurrent=true", "algo.num_layers=1", f"algo.hidden_size={HIDDEN}",
            "algo.num_envs=8", f"algo.rollout_len={Q_TRAINED}", f"algo.seq_len={Q_TRAINED}",
            f"algo.batch_size={Q_BATCH}", "algo.grad_steps=1", "algo.buffer_size=130000", "algo.learning_starts=0",
            f"algo.lr={Q_LR}", f"algo.gamma={Q_GAMMA}", f"algo.max_grad_norm={Q_NORM}", "algo.target_interval=200",
            "seeds=1", "progress=false", "tensorboard=false"]


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--updates", type=int, default=5, help="coplay PPO updates per timed chunk")
    ap.add_argument("--q-updates", type=int, default=20, help="coplay IQL updates per timed chunk")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    minimal, m_args, m_flops = minimal_program()                          # FLOPs per update
    chunk, state = coplay_program(args.updates)
    q_min, q_args, q_flops = q_program()
    q_chunk, q_state = coplay_program(args.q_updates, Q_COPLAY)
    states = {"coplay": state, "coplay_q": q_state}
    programs = {"minimal": lambda: minimal(*m_args), "minimal_q": lambda: q_min(*q_args)}
    per_call = {"minimal": 1, "coplay": args.updates, "minimal_q": 1, "coplay_q": args.q_updates}
    chunks = {"coplay": chunk, "coplay_q": q_chunk}

    def call(name):
        if name in programs:
            return jax.block_until_ready(programs[name]())
        states[name], metrics = chunks[name](states[name])
        return jax.block_until_ready((states[name], metrics))

    times: dict[str, list[float]] = {k: [] for k in per_call}
    for name in per_call:        # warm
        call(name)
    for _ in range(args.repeats):
        for name in per_call:
            t = time.perf_counter()
            call(name)
            times[name].append((time.perf_counter() - t) / per_call[name])
    med = {k: statistics.median(v) for k, v in times.items()}
    m_time, c_time = med["minimal"], med["coplay"]
    env_steps, q_env_steps = ENVS * STEPS, 8 * Q_TRAINED
    result = {"machine": machine(), "repeats": args.repeats, "updates_per_chunk": args.updates,
              "q_updates_per_chunk": args.q_updates, "seconds_per_update": times,
              "ppo": {"learning_flops_per_update": m_flops, "ceiling_flop_per_s": m_flops / m_time,
                      "coplay_share": m_time / c_time, "coplay_env_steps_per_s": env_steps / c_time,
                      "ceiling_env_steps_per_s": env_steps / m_time},
              "q": {"gradient_step_flops": q_flops, "ceiling_flop_per_s": q_flops / med["minimal_q"],
                    "coplay_share": med["minimal_q"] / med["coplay_q"],
                    "coplay_env_steps_per_s": q_env_steps / med["coplay_q"]}}
    ppo, q = result["ppo"], result["q"]
    lines = [
        "## The update's ceiling on this machine, and coplay's share of it", "",
        f"`python benchmarks/ceiling.py --repeats {args.repeats}` on {machine()}. The ceiling of each update is a "
        "minimal one written with JAX and optax alone at JaxMARL's shapes, which does only what the update cannot "
        "do without; coplay's share is that minimal update's time over coplay's whole update's (its environment "
        "steps, rollout and replay included), the two timed in alternation, medians. PPO: JaxMARL's "
        f"`ippo_ff_mpe.yaml` ({ENVS} environments x {STEPS} steps x {AGENTS} agents of spread, 2x{HIDDEN} tanh "
        f"actor and critic, {EPOCHS} epochs x {MINIBATCHES} minibatches of Adam on the clipped surrogate and clipped "
        f"value loss); the minimal one is the learning phase alone, coplay's is IPPO's whole update ({args.updates} "
        "per compiled chunk). Recurrent Q: JaxMARL's `ql_rnn_mpe.yaml` (a Dense-64, ReLU, GRU-64, Dense network "
        f"shared by the {AGENTS} agents, {Q_BATCH} windows of {Q_TRAINED} trained steps, a target network, double "
        "Q, Adam); the minimal one is one gradient step of independent Q-learning, coplay's is IQL's whole update "
        f"(8 environments x {Q_TRAINED} steps, the replay write, one gradient step; {args.q_updates} per chunk). "
        "FLOPs are XLA's count (one PPO minibatch step times 16; the Q step compiled with its time loop "
        "unrolled). JaxMARL's own share is not measured yet: its scripts need `distrax`, whose "
        "`tensorflow-probability` does not import under this JAX.", "",
        "| update | minimal (the ceiling), ms | its GFLOP/s | coplay's whole update, ms | coplay's share |",
        "|---|---|---|---|---|",
        f"| PPO, JaxMARL's IPPO shapes | {m_time * 1e3:,.1f} | {ppo['ceiling_flop_per_s'] / 1e9:,.1f} | "
        f"{c_time * 1e3:,.1f} | {100 * ppo['coplay_share']:.0f}% |",
        f"| recurrent Q, JaxMARL's IQL shapes | {med['minimal_q'] * 1e3:,.1f} | "
        f"{q['ceiling_flop_per_s'] / 1e9:,.1f} | {med['coplay_q'] * 1e3:,.1f} | {100 * q['coplay_share']:.0f}% |", "",
        f"The PPO learning phase is {m_flops / 1e9:.2f} GFLOP per update ({m_flops / env_steps / 1e6:.2f} MFLOP "
        f"per environment step): at the ceiling, {ppo['ceiling_env_steps_per_s']:,.0f} environment steps/s, "
        f"against coplay's {ppo['coplay_env_steps_per_s']:,.0f}. The Q gradient step is {q_flops / 1e9:.2f} GFLOP"
        + (". coplay's whole Q update runs faster than the gradient step written here alone (a share above "
           "100%): that step is no ceiling, and the Q update's ceiling is not established by this script."
           if q["coplay_share"] > 1 else "."),
    ]
    print("\n".join(lines))
    if not args.no_write:
        write_results("ceiling", result)
        write_section("ceiling", "\n".join(lines))


if __name__ == "__main__":
    main()
