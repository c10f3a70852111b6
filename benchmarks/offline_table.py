"""Offline MARL end to end on coplay's own environments: a behaviour run, its
datasets of every quality, and every offline trainer on each, scored in the
environment.

    python benchmarks/offline_table.py                           # spread, defaults below
    python benchmarks/offline_table.py --env foraging --behaviour-steps 400000 --seeds 10

1. A behaviour run: `coplay train algo=mappo` on the environment for
   `--behaviour-steps` steps, keeping every chunk's checkpoint.
2. Its datasets (`coplay record`): poor, medium, good, replay and mixed,
   `--episodes` episodes each.
3. Every offline trainer (bc, iql_cql, qmix_cql, cfcql, maicq) on every dataset,
   `--seeds` seeds vmapped, `--grad-steps` gradient steps, each seed scored on
   `--score-episodes` episodes in the environment (every trainer on the same
   starts; on spread 32 leave a seed's score off by about 0.1).

Scores are normalised as D4RL's are: (return - random play's) / (the best
behaviour policy's - random play's), each measured by its own dataset's mean
return (the poor dataset is random play, the good one the run's best
checkpoint playing, each `--episodes` episodes), so 1 is the best behaviour
policy's return and 0 random play's, on every dataset of the environment alike;
IQM and 95% bootstrap CI over seeds. Beside them, each dataset's mean and best
episode return. Results go to benchmarks/results/offline_<env>.json (runs with other
settings to the studies benchmarks/results/offline_scaling/ and offline_variants/),
then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS as RESULTS_DIR  # noqa: E402
from _common import load, regenerate_page, stamp, table, write_results  # noqa: E402

import coplay  # noqa: E402
from coplay.eval.stats import iqm, iqm_ci  # noqa: E402
from coplay.experiment.record import record_dataset  # noqa: E402

RESULTS = ("offline_spread.json", "offline_foraging.json")
QUALITIES = ("poor", "medium", "good", "replay", "mixed")
ALGOS = ("bc", "iql_cql", "qmix_cql", "cfcql", "maicq")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="spread")
    ap.add_argument("--env-overrides", nargs="*", default=[], help="env.<field>=value ...")
    ap.add_argument("--algo-overrides", nargs="*", default=[],
                    help="algo.<field>=value ... for every offline trainer (e.g. algo.eval_epsilon=0.1)")
    ap.add_argument("--behaviour-steps", type=int, default=300_000)
    ap.add_argument("--behaviour-chunks", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--grad-steps", type=int, default=5000)
    ap.add_argument("--eval-episodes", type=int, default=32,
                    help="episodes that score each behaviour checkpoint and random play when the datasets are made")
    ap.add_argument("--data-seed", type=int, default=0,
                    help="seed of the behaviour run (and, plus one, of the recording): another seed gives "
                         "other datasets of the same qualities, to check settings found on the default ones")
    ap.add_argument("--score-episodes", type=positive, default=None,
                    help="episodes per seed that score each offline trainer (default: --eval-episodes); every "
                         "trainer is scored on the same episodes' starts, so their shared draw moves every "
                         "column alike")
    ap.add_argument("--algos", nargs="*", default=list(ALGOS))
    ap.add_argument("--qualities", nargs="*", default=list(QUALITIES), choices=QUALITIES,
                    help="the datasets trained on (poor and good are always recorded: they set the scale)")
    ap.add_argument("--merge", action="store_true",
                    help="add these algorithms' rows to the results file's (its datasets are made again, from the "
                         "same seeds, and must come out the same)")
    args = ap.parse_args()
    overrides = args.env_overrides + args.algo_overrides
    name = (results_name(args.env, overrides) + (f"_score{args.score_episodes}" if args.score_episodes else "")
            + (f"_data{args.data_seed}" if args.data_seed else ""))
    where = results_file(name, args.env, overrides, not (args.algo_overrides or args.score_episodes or args.data_seed
                                                         or args.episodes != 500))
    env_args = [f"env={args.env}", *args.env_overrides]
    t0 = time.time()
    out: dict = {"settings": vars(args), "datasets": {}, "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        behaviour = behaviour_run(env_args, args.behaviour_steps, args.behaviour_chunks, f"{tmp}/runs",
                                  args.data_seed)
        print(f"behaviour run: {behaviour.final_return} ({time.time() - t0:.0f} s)", flush=True)
        vault = Path(tmp) / f"{args.env}.vlt"
        for quality in [q for q in QUALITIES if q in ("poor", "good", *args.qualities)]:
            rec = record_dataset(str(behaviour.run_dir), quality, args.episodes, vault, seed=args.data_seed + 1,
                                 eval_episodes=args.eval_episodes)
            s = rec["stats"]
            out["datasets"][quality] = {"path": rec["path"], "return_mean": s["return_mean"],
                                        "return_max": s["return_max"], "random": rec["random_score"],
                                        "checkpoints": rec["checkpoints"]}
            print(quality, out["datasets"][quality]["return_mean"], s["return_max"], flush=True)
        results = RESULTS_DIR / f"{where}.json"
        if args.merge and results.exists():
            same_datasets(json.loads(results.read_text()), out)     # before anything trains on them
        for quality in args.qualities:
            d = out["datasets"][quality]
            for algo in args.algos:
                t = time.time()
                run = coplay.train([f"algo={algo}", *env_args, f"algo.dataset={d['path']}", f"seeds={args.seeds}",
                                    f"total_steps={args.grad_steps}", f"chunk_steps={args.grad_steps}",
                                    f"eval_episodes={args.score_episodes or args.eval_episodes}", "progress=false",
                                    "logger=csv", f"out_dir={tmp}/runs", *args.algo_overrides])
                out["rows"].append({"quality": quality, "algo": algo, "per_seed": run.final_return["per_seed"],
                                    "seconds": time.time() - t})
                print(quality, algo, run.final_return["iqm"], f"{time.time() - t:.0f} s", flush=True)
    out["seconds"] = time.time() - t0
    if args.merge and results.exists():
        out = merged(json.loads(results.read_text()), out)
    write_results(where, {**stamp(), **out})
    regenerate_page()


def positive(text: str) -> int:
    """A whole number of at least 1 (argparse type)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def results_name(env: str, overrides: list[str]) -> str:
    """The results file's and section's name: the environment and its overrides, e.g. spread_n_agents6."""
    return "_".join([env, *[o.split(".", 1)[1].replace("=", "") for o in overrides]])


def behaviour_run(env_args: list[str], steps: int, chunks: int, out_dir: str, seed: int = 0):
    """The MAPPO run the datasets are recorded from (deterministic from its settings),
    one checkpoint kept per chunk."""
    return coplay.train(["algo=mappo", *env_args, "seeds=1", f"seed={seed}", f"total_steps={steps}",
                         f"chunk_steps={steps // chunks}", f"keep_checkpoints={chunks}", "progress=false",
                         "logger=csv", f"out_dir={out_dir}"])


def merged(old: dict, new: dict) -> dict:
    """`old`'s results with `new`'s algorithms added (or replaced), refused unless both
    were made on the same datasets (`same_datasets`)."""
    same_datasets(old, new)
    algos = [a for a in ALGOS if a in old["settings"]["algos"] or a in new["settings"]["algos"]]
    rows = [r for r in old["rows"] if r["algo"] not in new["settings"]["algos"]] + new["rows"]
    settings = {**old["settings"], "algos": algos}
    return {**old, "settings": settings, "rows": rows, "seconds": old["seconds"] + new["seconds"]}


def same_datasets(old: dict, new: dict) -> None:
    """Refuse (SystemExit) unless `old` and `new` were made on the same qualities and
    datasets (the same mean and best return at every quality)."""
    if list(old["settings"].get("qualities", QUALITIES)) != list(new["settings"]["qualities"]):
        raise SystemExit("--merge: the results file was made on other qualities; use the same --qualities")
    for quality, d in new["datasets"].items():
        o = old["datasets"][quality]
        if not np.allclose([o["return_mean"], o["return_max"]], [d["return_mean"], d["return_max"]]):
            raise SystemExit(f"--merge: the {quality} dataset came out differently ({d['return_mean']} vs "
                             f"{o['return_mean']}); run every algorithm again without --merge")


def results_file(name: str, env: str, overrides: list[str], plain: bool) -> str:
    """Where a run's results go: the main table's file (no overrides, default data and scoring), the
    scaling study's (only `env.n_agents`), or the variants study's (any other setting)."""
    if name == env and plain:
        return f"offline_{name}"
    if plain and overrides and all(o.startswith("env.n_agents=") for o in overrides):
        return f"offline_scaling/{name}"
    return f"offline_variants/{name}"


def cell(out: dict, quality: str, algo: str) -> str:
    """An algorithm's normalised score on a dataset, IQM [95% CI] over seeds, and its return's IQM."""
    random, best = out["datasets"]["poor"]["return_mean"], out["datasets"]["good"]["return_mean"]
    r = next((r for r in out["rows"] if r["quality"] == quality and r["algo"] == algo), None)
    if r is None:
        return "–"
    per_seed = np.asarray(r["per_seed"], np.float64)
    score = iqm_ci(((per_seed - random) / (best - random))[:, None])[0]
    return f"{score.value:.2f} [{score.low:.2f}, {score.high:.2f}] ({float(iqm(per_seed)):.2f})"


def command(out: dict) -> str:
    a = argparse.Namespace(**out["settings"])
    return ("python benchmarks/offline_table.py --env " + a.env
            + (f" --env-overrides {' '.join(a.env_overrides)}" if a.env_overrides else "")
            + (f" --qualities {' '.join(a.qualities)}" if list(getattr(a, "qualities", None) or QUALITIES)
               != list(QUALITIES) else "")
            + (f" --algo-overrides {' '.join(a.algo_overrides)}" if getattr(a, "algo_overrides", None) else "")
            + (f" --algos {' '.join(a.algos)}" if list(a.algos) != list(ALGOS) else "")
            + f" --behaviour-steps {a.behaviour_steps} --episodes {a.episodes} --seeds {a.seeds} "
              f"--grad-steps {a.grad_steps}"
            + (f" --score-episodes {a.score_episodes}" if getattr(a, "score_episodes", None) else "")
            + (f" --data-seed {a.data_seed}" if getattr(a, "data_seed", 0) else ""))


def _table(out: dict) -> list[str]:
    a = argparse.Namespace(**out["settings"])
    rows = []
    for quality in getattr(a, "qualities", None) or QUALITIES:
        d = out["datasets"][quality]
        rows.append([quality, f"{d['return_mean']:.2f}", f"{d['return_max']:.2f}",
                     *[cell(out, quality, algo) for algo in a.algos]])
    return table(["dataset", "mean return", "best episode", *a.algos], rows)


def _scale(out: dict) -> str:
    random, best = out["datasets"]["poor"]["return_mean"], out["datasets"]["good"]["return_mean"]
    return f"random play's {random:.2f}, the best behaviour policy's {best:.2f}"


# ----- the page ----------------------------------------------------------------------------------------------

TITLE = "Offline trainers on spread and foraging: five datasets, five trainers"


def section(data: dict) -> str:
    lines = [f"## {TITLE}", "",
             "Each environment: a MAPPO behaviour run, its datasets (poor: random play; medium, good: checkpoints; "
             "replay: the run's checkpoints in turn; mixed), and every offline trainer on each, its seeds vmapped, "
             "each seed scored in the environment. Normalised score as D4RL's: (return - random play's) / (the best "
             "behaviour policy's - random play's), each the mean return of its dataset (poor, good), IQM [95% CI] "
             "over seeds; in brackets, the return's IQM. The trainers play greedily (their defaults)."]
    for out in data.values():
        a = argparse.Namespace(**out["settings"])
        lines += ["", f"### {a.env}", "",
                  f"`{command(out)}` ({out['seconds'] / 60:.0f} min). Datasets of {a.episodes} episodes from a MAPPO "
                  f"run of {a.behaviour_steps:,} steps; per-agent returns; {a.seeds} seeds per trainer, each scored on "
                  f"{getattr(a, 'score_episodes', None) or a.eval_episodes} episodes; the scale: {_scale(out)}.", "",
                  *_table(out)]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    return []


SCALING = "offline_scaling/"


def load_scaling() -> dict | None:
    """The scaling study's runs, with the main spread table's (3 agents) first."""
    runs = load(SCALING)
    if not runs:
        return None
    base = load("offline_spread.json")
    agents = lambda item: int(dict(o.replace("env.", "").split("=") for o in item[1]["settings"]["env_overrides"])  # noqa: E731
                              .get("n_agents", 3))
    return {**({"spread": base} if base else {}), **dict(sorted(runs.items(), key=agents))}


def scaling_section(data: dict, quality: str = "mixed") -> str:
    ran = lambda out, algo: any(r["algo"] == algo and r["quality"] == quality for r in out["rows"])  # noqa: E731
    algos = [a for a in ALGOS if any(ran(o, a) for o in data.values())]
    rows = []
    for name, out in data.items():
        overrides = dict(o.replace("env.", "").split("=") for o in out["settings"]["env_overrides"])
        rows.append([name, overrides.get("n_agents", "3"), f"{out['datasets'][quality]['return_mean']:.2f}",
                     *[cell(out, quality, algo) if ran(out, algo) else "not run" for algo in algos]])
    return "\n".join([
        f"## Offline trainers as agents are added (spread, {quality} data)", "",
        "A study (`benchmarks/results/offline_scaling/`, its README says what and why): spread with more agents, each "
        "run made as the main table's is (a MAPPO run, its datasets, 10 seeds per trainer, greedy play), by `"
        + "`, `".join(command(out) for name, out in data.items() if name != "spread") + "`; the 3-agent row is the "
        "main spread table's. Normalised score as there, on each run's own scale, IQM [95% CI] over seeds; in "
        "brackets, the return's IQM.", "",
        *table(["environment", "agents", "dataset mean return", *algos], rows)])


STUDY = "offline_variants/"


def _variant(out: dict) -> str:
    a = out["settings"]
    said = [" ".join(a.get("algo_overrides") or []) or "defaults"]
    said += [f"{a['episodes']} episodes"]
    if a.get("score_episodes"):
        said.append(f"scored on {a['score_episodes']} episodes")
    if a.get("data_seed"):
        said.append(f"data seed {a['data_seed']}")
    return ", ".join(said)


def study_section(data: dict) -> str:
    rows = []
    for env in ("foraging", "spread"):
        for out in data.values():
            if out["settings"]["env"] != env:
                continue
            for quality in out["settings"].get("qualities") or QUALITIES:
                rows.append([env, _variant(out), quality, f"{out['datasets'][quality]['return_mean']:.2f}",
                             *[cell(out, quality, algo) for algo in ALGOS]])
    return "\n".join([
        "## Offline trainers with other settings: acting, conservatism, reward scale, mixer", "",
        f"A study of {len(data)} runs (`benchmarks/results/offline_variants/`; its README gives the question and the "
        "commands): the main tables' environments and datasets (made again from the same seeds, and checked equal), "
        "each trainer with the settings named (algo overrides, and where other, the dataset size, scoring episodes "
        "or the seed the datasets were made from). Normalised score as in the main tables, on each run's own "
        "scale, IQM [95% CI] over seeds; in brackets, the return's IQM; – where a trainer was not run.", "",
        *table(["env", "settings", "dataset", "data's mean return", *ALGOS], rows)])


if __name__ == "__main__":
    main()
