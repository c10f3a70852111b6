"""Error types. Every message names the bad value and, where there is a set of
valid choices, lists them, so a user can fix the call without reading code."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import jax


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
    """A checkpoint is missing, unreadable, damaged, or belongs to another config."""


class CheckpointConfigError(CheckpointError):
    """A checkpoint was written by another config than the one it is loaded with."""


class StorageError(CoplayError, OSError):
    """A run directory or a file in it cannot be written (an unwritable path, a full disk)."""


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


def did_you_mean(value: object, choices: Iterable[object]) -> str:
    """`"; did you mean 'x'?"` for the choice closest to a misspelt `value`, or "" where none is close."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, [str(c) for c in choices], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def unknown_name(kind: str, value: object, choices: Iterable[str]) -> UnknownNameError:
    """Build the standard 'unknown X' error with a close-match hint."""
    choices = sorted(choices)
    return UnknownNameError(
        f"unknown {kind} {value!r}{did_you_mean(value, choices)} valid choices: {', '.join(choices)}"
    )


# Coplay errors raised inside host callbacks of compiled functions. XLA hands the
# caller only `JaxRuntimeError: INTERNAL: CpuCallback error ...`, so the callback
# keeps the error here and `callback_errors` raises it again, whole.
_from_callbacks: list[CoplayError] = []


def _not_reraised(record: logging.LogRecord) -> bool:
    """JAX logs every failed callback with its traceback; one that `callback_errors`
    raises again (a coplay error of its own, with no foreign cause) needs no log."""
    error = record.exc_info[1] if record.exc_info else None
    return not (isinstance(error, CoplayError) and error in _from_callbacks and error.__cause__ is None)


def raised_in_callback(error: CoplayError) -> CoplayError:
    """Keep `error`, about to be raised inside a host callback, for `callback_errors`; returns it."""
    _from_callbacks.append(error)
    return error


@contextmanager
def callback_errors() -> Iterator[None]:
    """Around calls of compiled functions: a call that fails because a host callback
    raised a coplay error (a bridged environment that broke its API, say) raises
    that error, with its own type and message, instead of XLA's runtime error."""
    _from_callbacks.clear()
    log = logging.getLogger("jax._src.callback")
    outermost = _not_reraised not in log.filters
    log.addFilter(_not_reraised)
    try:
        yield
    except (jax.errors.JaxRuntimeError, ValueError) as e:  # XLA reports a failed callback as either
        if not _from_callbacks or isinstance(e, CoplayError) or "Callback error" not in str(e):
            raise
        error = _from_callbacks[0]
        _from_callbacks.clear()
        raise error from e
    finally:
        if outermost:
            log.removeFilter(_not_reraised)
