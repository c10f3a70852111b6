"""The registry of trainers, `ALGOS`, and the refusal of an environment no trainer
of a name can train on. The entries are registered by `coplay.algos`; this module
is below every algorithm, so the contract in `algos/base.py` can name the
trainers that can take an environment without importing them."""

from __future__ import annotations

from typing import Literal, get_args

from coplay.core.errors import ConfigError
from coplay.core.registry import Registry
from coplay.core.types import EnvSpec

# Which engine runs a trainer: `compiled`, its `update` is one pure program (`algos.base.Trainer`);
# `host`, its update runs on the host, one seed after another (`algos.base.HostTrainer`).
Engine = Literal["compiled", "host"]
ENGINES: tuple[str, ...] = get_args(Engine)

ALGOS = Registry("algorithm", engines=ENGINES)


def check_env_support(spec: EnvSpec, algo: str, capabilities: object) -> None:
    """Refuse an environment the algorithm cannot train on (`capabilities.problems`),
    naming the registered algorithms that can."""
    problems = capabilities.problems(spec)  # type: ignore[attr-defined]
    if not problems:
        return
    able = [name for name, entry in ALGOS.items() if not entry.capabilities.problems(spec)]
    raise ConfigError(
        f"algorithm {algo!r} cannot train on environment {spec.name!r}: {'; '.join(problems)}. "
        f"Algorithms that can: {', '.join(able) or 'none registered'}")
