"""Algorithms, one module each, registered by name with their config and capabilities.

`ALGOS` holds the trainers (`coplay train algo=NAME`); every entry's factory
is a `coplay.algos.base.Trainer` subclass, called as `Trainer(config, env,
num_updates)`, run by the compiled engine, or a `HostTrainer` subclass (a
language model in PyTorch), called as `HostTrainer(config, env, num_updates,
seeds=S, seed=run_seed)` and run by the host engine: each entry's `engine` says
which (`coplay.algos.registry.ENGINES`). The game solvers that are not trainers (`coplay solve`) are in
`coplay.algos.solvers.SOLVERS`."""

from __future__ import annotations

from coplay.algos import (
    bc,
    cfcql,
    cfr,
    fictitious_play,
    grpo,
    happo,
    hatrpo,
    ippo,
    iql,
    iql_cql,
    lm_grpo,
    maicq,
    mappo,
    mo_ppo,
    mo_qmix,
    pc_mappo,
    psro,
    psro_ppo,
    qmix,
    qmix_cql,
    selfplay_ppo,
    vdn,
)
from coplay.algos.base import HostTrainer, Learner, TrainerConfig
from coplay.algos.registry import ALGOS
from coplay.algos.solvers import SOLVERS
from coplay.core.errors import UnknownNameError
from coplay.core.registry import Entry


def _register(trainer: type[Learner], kind: str, description: str) -> None:
    ALGOS.register(trainer.name, trainer, kind=kind, description=description, config=trainer.config_class,
                   capabilities=trainer.capabilities, engine="host" if issubclass(trainer, HostTrainer) else "compiled")


_register(mappo.MAPPO, "on-policy", "multi-agent PPO with a centralised critic on global_state")
_register(ippo.IPPO, "on-policy", "independent PPO: each agent's critic sees its own observation")
_register(happo.HAPPO, "on-policy", "heterogeneous-agent PPO: an actor per agent, updated one after another in a "
                                   "random order, each weighted by the earlier agents' probability ratios")
_register(hatrpo.HATRPO, "on-policy", "heterogeneous-agent TRPO: HAPPO's sequential scheme, each agent's step a "
                                     "KL-constrained natural-gradient step (conjugate gradient, line search)")
_register(mo_ppo.MOPPO, "multi-objective", "a weight sweep of MAPPO on linear utilities of vector rewards: W "
                                           "preference weights vmapped beside the seeds, a Pareto front per run")
_register(pc_mappo.PCMAPPO, "multi-objective", "preference-conditioned MAPPO: one policy takes the weight as input, "
                                               "a critic with a head per objective, a weight drawn per episode")
_register(mo_qmix.MOQMIX, "multi-objective", "QMIX over vector Q-values, one monotonic mixer per objective, "
                                             "conditioned on a weight drawn per episode (MO-MIX)")
_register(iql.IQL, "off-policy", "independent Q-learning: each agent learns its own Q from its own reward")
_register(vdn.VDN, "off-policy", "value decomposition: the team's Q is the sum of the agents' Q")
_register(qmix.QMIX, "off-policy", "monotonic mixing of the agents' Q by hypernetworks on the global state")
_register(bc.BC, "offline", "behaviour cloning from a dataset (algo.dataset): each agent's network imitates "
                            "the data's actions")
_register(iql_cql.IQLCQL, "offline", "independent Q-learning from a dataset with CQL's penalty on each agent's "
                                     "own actions")
_register(qmix_cql.QMIXCQL, "offline", "QMIX (or VDN) from a dataset with CQL's penalty over the team's joint "
                                       "actions (MACQL)")
_register(cfcql.CFCQL, "offline", "counterfactual CQL: QMIX (or VDN) from a dataset, CQL's penalty one agent at a "
                                  "time with the others at the data's actions")
_register(maicq.MAICQ, "offline", "implicit constraint actor-critic: a team value by SARSA on the data's actions, "
                                 "policies by advantage-weighted regression (MAICQ)")
_register(selfplay_ppo.SelfPlayPPO, "self-play",
          "PPO against a pool of its own snapshots (latest, uniform or PFSP), every seat")
_register(grpo.GRPO, "text", "group-relative policy optimisation of a token-level policy on text environments, "
                             "any group-relative estimator (algo.estimator), self-play or a snapshot pool")
_register(lm_grpo.LMGRPO, "language model", "a pretrained language model (transformers) trained with LoRA (peft) on "
                                            "text environments, self-play, any group-relative estimator; on the host")

SOLVERS.register("cfr", cfr.run, kind="game tree", config=cfr.Config, capabilities=cfr.SUPPORT,
                 description="counterfactual regret minimisation: CFR, CFR+ or discounted CFR (algo.variant)")
SOLVERS.register("psro", psro.run, kind="game tree", config=psro.Config, capabilities=psro.SUPPORT,
                 description="PSRO with exact best responses; nash, replicator or uniform meta-solver")
SOLVERS.register("psro_ppo", psro_ppo.run, kind="two-player", config=psro_ppo.Config,
                 capabilities=psro_ppo.SUPPORT,
                 description="PSRO with best responses trained by self-play PPO, on any two-player zero-sum game")
SOLVERS.register("fictitious_play", fictitious_play.run, kind="matrix game", config=fictitious_play.Config,
                 capabilities=fictitious_play.SUPPORT,
                 description="fictitious play on two-player normal-form games")


def get_algo(name: str) -> Entry:
    """The trainer registered as `name`; a solver's name is pointed to `coplay solve`."""
    if name in SOLVERS and name not in ALGOS:
        raise UnknownNameError(f"{name!r} is a game solver, not a trainer: run it with `coplay solve algo={name} "
                               f"env=...`; trainers: {', '.join(ALGOS.names())}")
    return ALGOS.get(name)


def algo_config_class(name: str) -> type[TrainerConfig]:
    """The config dataclass of the registered algorithm `name`."""
    config = ALGOS.get(name).config
    assert config is not None, f"algorithm {name!r} was registered without a config class"
    return config


def list_algos() -> list[str]:
    return ALGOS.names()
