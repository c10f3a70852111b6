"""Offline gradient steps per second: coplay's compiled update beside a
straightforward PyTorch implementation of the same update, on the same dataset,
in the same run.

    python benchmarks/offline_speed.py                 # 2,000 steps each, 3 repeats
    python benchmarks/offline_speed.py --steps 500 --repeats 1

OG-MARL (whose PyTorch IQL+CQL sets the configuration here: one Linear-GRU
agent network shared by every agent with a one-hot id, windows of 20 steps, 64
windows per batch, double Q, a hard target copy every 200 steps, Adam at 3e-4)
is not on PyPI and cannot be installed on this machine, so the PyTorch side is
written in this file the way OG-MARL's and the CFCQL authors' code are: one
optimiser step per Python call, the window unrolled step by step with the GRU
state zeroed where an episode starts, windows drawn uniformly from the dataset
held as tensors. Both sides compute the same loss on the same architecture
(coplay's `algo.recurrent=true algo.num_layers=1`: Linear, ReLU, GRU, Linear),
with the same gradient clip and optimiser.

Rows: `iql_cql` (independent Q-learning with CQL on each agent's actions) and
`cfcql` (a QMIX team value with the counterfactual penalty, uniform weights).
The dataset: random play on spread (3 agents), `--episodes` episodes, recorded
by coplay and read by both. coplay: one seed, and 10 seeds vmapped (their
gradient steps summed, `--steps` / 10 each), one chunk of a run long enough
to be compiled as training runs are; compile time reported apart and not
counted. PyTorch:
`torch.set_num_threads` = the machine's cores; the first 20 steps are not timed.
The three sides are timed in turn, `--repeats` rounds, on the same number of
gradient steps (refused otherwise); a ratio is the median of the per-round ratios.
Results go to benchmarks/results/offline_speed.json, then BENCHMARKS.md
(benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import jax  # noqa: E402
import torch  # noqa: E402
from _common import fmt_ratio, paired, regenerate_page, same_budget, stamp, table, write_results  # noqa: E402
from torch import nn  # noqa: E402

import coplay  # noqa: E402
from coplay.experiment.compiled import FEW_UPDATES, chunk_function, init_state, plan  # noqa: E402
from coplay.experiment.config import parse_overrides  # noqa: E402
from coplay.offline import load, random_policy, record, save  # noqa: E402

RESULTS = "offline_speed.json"

WINDOW, BATCH, HIDDEN, LR, GAMMA, TARGET_EVERY, CLIP, ALPHA = 20, 64, 64, 3e-4, 0.99, 200, 10.0, 1.0
EMBED, HYPER = 32, 64
SHARED = [f"algo.batch_size={BATCH}", f"algo.hidden_size={HIDDEN}", f"algo.lr={LR}", "algo.anneal_lr=false",
          f"algo.gamma={GAMMA}", f"algo.target_interval={TARGET_EVERY}", f"algo.max_grad_norm={CLIP}",
          f"algo.cql_alpha={ALPHA}"]
# the agent network: OG-MARL's (Linear, ReLU, GRU, Linear over windows of 20 steps), or coplay's default
# feed-forward one (two ReLU layers, one trained step and its bootstrap per window)
NETS = {"GRU": ["algo.recurrent=true", "algo.num_layers=1", f"algo.seq_len={WINDOW - 1}"],
        "MLP": ["algo.recurrent=false", "algo.num_layers=2"]}


# ----- the PyTorch side ---------------------------------------------------------------------------------------

class Agent(nn.Module):
    def __init__(self, inp: int, actions: int, recurrent: bool):
        super().__init__()
        self.recurrent = recurrent
        self.fc, self.head = nn.Linear(inp, HIDDEN), nn.Linear(HIDDEN, actions)
        self.gru = nn.GRUCell(HIDDEN, HIDDEN) if recurrent else nn.Linear(HIDDEN, HIDDEN)

    def unroll(self, obs: torch.Tensor, reset: torch.Tensor) -> torch.Tensor:
        """obs [L, B, N, D], reset [L, B] -> Q [L, B, N, A]."""
        if not self.recurrent:
            return self.head(torch.relu(self.gru(torch.relu(self.fc(obs)))))
        length, b, n, _ = obs.shape
        h = obs.new_zeros(b * n, HIDDEN)
        out = []
        for t in range(length):
            h = h * (1.0 - reset[t].repeat_interleave(n)[:, None])
            h = self.gru(torch.relu(self.fc(obs[t].reshape(b * n, -1))), h)
            out.append(self.head(h).reshape(b, n, -1))
        return torch.stack(out)


class Mixer(nn.Module):
    """QMIX's monotonic mixer, as coplay's `MonotonicMixer`."""

    def __init__(self, n: int, state: int):
        super().__init__()
        self.n = n
        self.w1 = nn.Sequential(nn.Linear(state, HYPER), nn.ReLU(), nn.Linear(HYPER, n * EMBED))
        self.b1 = nn.Linear(state, EMBED)
        self.w2 = nn.Sequential(nn.Linear(state, HYPER), nn.ReLU(), nn.Linear(HYPER, EMBED))
        self.v = nn.Sequential(nn.Linear(state, EMBED), nn.ReLU(), nn.Linear(EMBED, 1))

    def forward(self, q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """q [M, J, N] joint actions of each state, s [M, S] -> [M, J]."""
        m = s.shape[0]
        w1 = torch.abs(self.w1(s)).reshape(m, self.n, EMBED)
        hidden = torch.nn.functional.elu(torch.einsum("mjn,mne->mje", q, w1) + self.b1(s)[:, None])
        return (hidden * torch.abs(self.w2(s))[:, None]).sum(-1) + self.v(s)


class TorchOffline:
    """One gradient step of iql_cql or cfcql per `step()`, as OG-MARL's systems take them."""

    def __init__(self, algo: str, arrays: dict[str, np.ndarray], recurrent: bool, seed: int = 0):
        torch.manual_seed(seed)
        self.algo = algo
        self.window = WINDOW if recurrent else 2
        self.data = {k: torch.as_tensor(np.array(v)) for k, v in arrays.items()}
        self.steps_total = arrays["obs"].shape[0]
        n, a = arrays["legal"].shape[1:]
        self.n = n
        self.agent = Agent(arrays["obs"].shape[-1], a, recurrent)
        self.target = Agent(arrays["obs"].shape[-1], a, recurrent)
        params = list(self.agent.parameters())
        if algo == "cfcql":
            self.mixer, self.target_mixer = Mixer(n, arrays["state"].shape[-1]), Mixer(n, arrays["state"].shape[-1])
            params += list(self.mixer.parameters())
        self.params = params
        self.opt = torch.optim.Adam(params, lr=LR)
        self.count = 0
        self.sync()

    def sync(self) -> None:
        self.target.load_state_dict(self.agent.state_dict())
        if self.algo == "cfcql":
            self.target_mixer.load_state_dict(self.mixer.state_dict())

    def sample(self) -> dict[str, torch.Tensor]:
        start = torch.randint(0, self.steps_total - self.window + 1, (BATCH,))
        at = start[None, :] + torch.arange(self.window)[:, None]                                   # [L, B]
        return {k: v[at] for k, v in self.data.items()}

    def step(self) -> float:
        w = self.sample()
        t = self.window - 1
        q = self.agent.unroll(w["obs"], w["reset"])                                         # [L, B, N, A]
        with torch.no_grad():
            q_target = self.target.unroll(w["obs"], w["reset"])
            best = torch.where(w["legal"][1:], q[1:], torch.tensor(-1e9)).argmax(-1, keepdim=True)
            next_value = q_target[1:].gather(-1, best)[..., 0]                                # [T, B, N]
        q_taken = q[:t].gather(-1, w["action"][:t, ..., None])[..., 0]
        alive = 1.0 - w["done"][:t]
        masked = torch.where(w["legal"][:t], q[:t], torch.tensor(-1e9))
        if self.algo == "iql_cql":
            target = w["reward"][:t] + GAMMA * alive[..., None] * next_value
            td = 0.5 * ((q_taken - target) ** 2).mean()
            penalty = (torch.logsumexp(masked, -1) - q_taken).mean()
        else:
            s = w["state"]
            m = t * BATCH
            q_tot = self.mixer(q_taken.reshape(m, 1, self.n), s[:t].reshape(m, -1)).reshape(t, BATCH)
            with torch.no_grad():
                boot = self.target_mixer(next_value.reshape(m, 1, self.n), s[1:].reshape(m, -1)).reshape(t, BATCH)
            target = w["reward"][:t].mean(-1) + GAMMA * alive * boot
            td = 0.5 * ((q_tot - target) ** 2).mean()
            # agent i's action set to each a, the others' at the data's: [T, B, N * A, N]
            a = q.shape[-1]
            joint = q_taken[:, :, None, None, :].expand(t, BATCH, self.n, a, self.n).clone()
            eye = torch.eye(self.n, dtype=torch.bool)[None, None, :, None, :].expand_as(joint)
            joint = torch.where(eye, q[:t, :, :, :, None].expand_as(joint), joint)
            cf = self.mixer(joint.reshape(m, self.n * a, self.n), s[:t].reshape(m, -1)).reshape(t, BATCH, self.n, a)
            cf = torch.where(w["legal"][:t], cf, torch.tensor(-1e9))
            penalty = ((torch.logsumexp(cf, -1).mean(-1)) - q_tot).mean()
        loss = td + ALPHA * penalty
        self.opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.params, CLIP)
        self.opt.step()
        self.count += 1
        if self.count % TARGET_EVERY == 0:
            self.sync()
        return float(loss.detach())


def torch_arrays(path: Path, env) -> dict[str, np.ndarray]:
    """The dataset as the PyTorch side reads it (agent ids appended, episode starts as resets)."""
    e = load(path, env=env).experience
    obs = np.asarray(e["observations"][0], np.float32)
    steps, n = obs.shape[:2]
    end = np.maximum(e["terminals"][0], e["truncations"][0]).max(-1) > 0
    return {"obs": np.concatenate([obs, np.broadcast_to(np.eye(n, dtype=np.float32), (steps, n, n))], -1),
            "action": np.asarray(e["actions"][0], np.int64), "reward": np.asarray(e["rewards"][0], np.float32),
            "done": end.astype(np.float32), "reset": np.concatenate([[1.0], end[:-1]]).astype(np.float32),
            "legal": np.asarray(e["infos"]["legals"][0], bool),
            "state": np.asarray(e["infos"]["state"][0], np.float32).reshape(steps, -1)}


def time_torch(algo: str, net: str, arrays: dict, steps: int) -> float:
    runner = TorchOffline(algo, arrays, recurrent=net == "GRU")
    for _ in range(20):
        runner.step()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = runner.step()
    seconds = time.perf_counter() - t0
    assert np.isfinite(loss)
    return steps / seconds


# ----- the coplay side ---------------------------------------------------------------------------------------

def time_coplay(algo: str, net: str, dataset: Path, steps: int, seeds: int) -> tuple[float, float, int]:
    """(gradient steps per second over all seeds, compile seconds, gradient steps timed over all seeds).
    The timed chunk of `steps` is one of a
    run longer than `compiled.FEW_UPDATES` updates: a run of only the timed updates would have its chunk
    compiled as a smoke test's, without machine-code optimisation (`coplay.core.compile`), 2-3x slower
    than any training run's."""
    exp = parse_overrides([f"algo={algo}", "env=spread", f"algo.dataset={dataset}", f"seeds={seeds}",
                           f"total_steps={steps * (FEW_UPDATES + 1)}", f"chunk_steps={steps}",
                           "algo.grad_steps=100", "progress=false", "logger=csv", *SHARED, *NETS[net]])
    p = plan(exp)
    assert p.num_chunks * p.updates_per_chunk > FEW_UPDATES
    state = init_state(p)
    t0 = time.perf_counter()
    chunk = chunk_function(p).lower(state).compile()
    compile_s = time.perf_counter() - t0
    state, _ = chunk(state)                       # once untimed: first-call costs
    jax.block_until_ready(state)
    t0 = time.perf_counter()
    state, metrics = chunk(state)
    jax.block_until_ready((state, metrics))
    seconds = time.perf_counter() - t0
    assert np.all(np.isfinite(np.asarray(metrics["loss"])))
    done = p.updates_per_chunk * p.trainer.steps_per_update * seeds
    return done / seconds, compile_s, done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2000, help="gradient steps timed per measurement")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--nets", nargs="*", default=list(NETS), choices=list(NETS))
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    env = coplay.make("spread")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = save(record(env, random_policy(env), args.episodes, jax.random.PRNGKey(0), "poor"),
                    Path(tmp) / "spread.vlt" / "poor")
        arrays = torch_arrays(path, env)
        for net, algo in [(net, algo) for net in args.nets for algo in ("iql_cql", "cfcql")]:
            steps = args.steps * (1 if net == "GRU" else 5)      # a feed-forward step is the shorter
            runs: dict[str, list[float]] = {"coplay, 1 seed": [], "coplay, 10 seeds": [], "PyTorch": []}
            compile_s = []
            for _ in range(args.repeats):          # in turn, so that a slow minute hits every side
                one, c, done_one = time_coplay(algo, net, path, steps, 1)
                ten, _, done_ten = time_coplay(algo, net, path, max(steps // 10, 100), 10)
                same_budget("coplay, 1 seed", done_one, "PyTorch", steps, "gradient steps")
                same_budget("coplay, 10 seeds", done_ten, "PyTorch", steps, "gradient steps")
                runs["coplay, 1 seed"].append(one)
                runs["coplay, 10 seeds"].append(ten)
                runs["PyTorch"].append(time_torch(algo, net, arrays, steps))
                compile_s.append(c)
                print(net, algo, {k: round(v[-1], 1) for k, v in runs.items()}, flush=True)
            rows.append({"algo": algo, "net": net, "steps": steps, "compile_s": float(np.median(compile_s)),
                         "steps_per_s": {k: float(np.median(v)) for k, v in runs.items()}, "all": runs})
    write_results("offline_speed", {"settings": vars(args), **stamp(), "torch": torch.__version__,
                                    "jax": jax.__version__, "threads": torch.get_num_threads(), "rows": rows})
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------

TITLE = "Offline gradient steps per second beside PyTorch"


def section(data: dict) -> str:
    a = data["settings"]
    lines = [f"## {TITLE}", "",
             f"`python benchmarks/offline_speed.py --steps {a['steps']} --repeats {a['repeats']}` on "
             f"{data['machine']}, PyTorch {data['torch']}"
             + (f" ({data['threads']} threads)" if "threads" in data else "") + ". The same update on both sides: "
             f"{BATCH} windows per batch, an agent network of {HIDDEN} units shared by spread's 3 agents, double Q, a "
             f"target copy every {TARGET_EVERY} steps, Adam {LR}, gradient clip {CLIP}. GRU: OG-MARL's IQL+CQL "
             f"configuration (Linear, ReLU, GRU, Linear; windows of {WINDOW} steps, {a['steps']} steps timed); MLP: "
             "coplay's default agent (two ReLU layers; one trained step and its bootstrap per window, "
             f"{a['steps'] * 5} steps timed). OG-MARL itself is not installable here, so the PyTorch side is this "
             "file's, written as OG-MARL's systems are: one optimiser step per Python call. Dataset: random play on "
             f"spread, {a['episodes']} episodes. Gradient steps per second, the three sides timed in turn, "
             f"{a['repeats']} rounds: medians over rounds, and the median of the per-round ratios (range in "
             "brackets); coplay's compile time apart, not counted.", ""]
    rows = []
    for r in data["rows"]:
        s, al = r["steps_per_s"], r["all"]
        rows.append([r["algo"], r["net"], f"{s['coplay, 1 seed']:.0f}", f"{s['coplay, 10 seeds']:.0f}",
                     f"{s['PyTorch']:.0f}", fmt_ratio(paired(al["coplay, 1 seed"], al["PyTorch"])),
                     fmt_ratio(paired(al["coplay, 10 seeds"], al["PyTorch"])), f"{r['compile_s']:.1f}"])
    lines += table(["algorithm", "network", "coplay, 1 seed", "coplay, 10 seeds vmapped (all seeds' steps)",
                    "PyTorch", "coplay 1 seed / PyTorch", "coplay 10 seeds / PyTorch", "coplay compile s"], rows)
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    out = []
    for net in ("GRU", "MLP"):
        rs = [r for r in data["rows"] if r["net"] == net]
        if not rs:
            continue
        ratios = [paired(r["all"]["coplay, 1 seed"], r["all"]["PyTorch"]) for r in rs]
        lo, hi = min(x["median"] for x in ratios), max(x["median"] for x in ratios)
        out.append({"claim": f"offline gradient steps/s beside a PyTorch implementation of the same update ({net})",
                    "workload": f"{', '.join(r['algo'] for r in rs)} on spread, one seed, {rs[0]['steps']:,} steps",
                    "ratio": f"{lo:.2f}x-{hi:.2f}x (medians over {ratios[0]['n']} rounds in turn)",
                    "machine": data["machine"]})
    return out

if __name__ == "__main__":
    main()
