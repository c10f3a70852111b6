"""Error types. Every message names the bad value and, where there is a set of
valid choices, lists them, so a user can fix the call without reading code."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class CoplayError(Exception):
    """Base class of every error coplay raises on purpose."""


class ConfigError(CoplayError, ValueError):
    """A config value, keyword argument or override is unknown, of the wrong
    type, or out of range."""


class UnknownNameError(ConfigError, KeyError):
    """A name (environment, algorithm, config field, game) is not registered."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class ActionError(CoplayError, ValueError):
    """Actions passed to an environment have the wrong shape or dtype."""


class CheckpointError(CoplayError):
    """A checkpoint is missing, unreadable, or belongs to another config."""


class TrainingError(CoplayError, RuntimeError):
    """Training produced a non-finite value or otherwise cannot continue."""


class SolverError(CoplayError, RuntimeError):
    """A game solver could not finish (e.g. its linear program failed)."""


class MissingExtraError(CoplayError, ImportError):
    """An optional library that a coplay feature needs is not installed."""


class HostEnvError(CoplayError, RuntimeError):
    """A host-stepped environment broke its API, or a handle was misused."""


class SweepError(CoplayError):
    """Ray cannot be reached or started, or Tune itself failed."""


class RegistryError(CoplayError, ValueError):
    """A name is registered twice, or a registration is malformed (a programming error)."""


def unknown_name(kind: str, value: object, choices: Iterable[str]) -> UnknownNameError:
    """Build the standard 'unknown X' error with a close-match hint."""
    choices = sorted(choices)
    hint = ""
    if isinstance(value, str):
        close = difflib.get_close_matches(value, choices, n=1)
        if close:
            hint = f"; did you mean {close[0]!r}?"
    return UnknownNameError(
        f"unknown {kind} {value!r}{hint} valid choices: {', '.join(choices)}"
    )
