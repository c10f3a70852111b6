"""Typed config fields with help text and ranges, shared by algorithms and the
experiment runner. A field is declared with `param(...)`; `check(cfg)` validates
every field and raises ConfigError naming the field, the bad value and what is
allowed; `coerce(cls, name, text)` turns a command-line string into the field's
type (so `algo.lr=3e-4` and `total_steps=2e6` both work)."""

from __future__ import annotations

import ast
import dataclasses
import math
import numbers
import typing
from collections.abc import Callable
from typing import Any

import numpy as np

from coplay.core.errors import ConfigError, did_you_mean, unknown_name


def param(default: Any, help: str, *, min: float | None = None, max: float | None = None,
          choices: tuple | None = None, min_exclusive: bool = False, affects_results: bool = True,
          rule: Callable[[Any], str | None] | None = None) -> Any:
    """A dataclass field with help text and an allowed range or set of choices.
    `affects_results=False` marks a field that changes how a run is shown or
    stored but not what it computes (a progress bar, where files go), so a run
    may be resumed, and a sweep trial recognised, with another value. `rule`,
    for what a range cannot say, returns what is wrong with a value (or None)."""
    return dataclasses.field(
        default=default,
        metadata={"help": help, "min": min, "max": max, "choices": choices, "min_exclusive": min_exclusive,
                  "affects_results": affects_results, "rule": rule},
    )


def param_default(base: type, name: str, default: Any) -> Any:
    """Field `name` of the config dataclass `base` (its help, range and choices) with
    another default, for a config that shares a family's fields and differs in a default."""
    f = {g.name: g for g in dataclasses.fields(base)}[name]
    return dataclasses.field(default=default, metadata=f.metadata)


def free_fields(cls_or_cfg: Any) -> list[str]:
    """The names of the fields that do not change what a run computes (see `param`)."""
    return [f.name for f in dataclasses.fields(cls_or_cfg) if not f.metadata.get("affects_results", True)]


def fields(cls_or_cfg: Any) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls_or_cfg)}


def _type_of(cls: type, name: str) -> Any:
    hints = typing.get_type_hints(cls)
    return hints[name]


def parse_scalar(text: str) -> Any:
    """'3e-4' -> 0.0003, '2e6' -> 2000000.0, 'true' -> True, 'none' -> None, else the string."""
    low = text.strip().lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("none", "null", "~"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_sequence(where: str, text: str) -> tuple:
    """'[1, 2]' or '(1, 2)' -> (1, 2), nested brackets giving nested tuples ('[[3, 0], [4, 1]]'
    -> ((3, 0), (4, 1))): a field whose value is a sequence, written on the command line.
    Anything else is refused, naming `where`."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{where}={text!r} is not a sequence; write it in brackets, such as {where}=[0.3,0.7] "
                          f"(a matrix: [[3,0],[5,1]])")
    return as_tuples(value)


def as_tuples(value: Any) -> Any:
    """Lists and tuples, nested, as tuples: one form for a sequence whether it came from a
    default, the command line or a config file (YAML reads tuples back as lists)."""
    return tuple(as_tuples(x) for x in value) if isinstance(value, (list, tuple)) else value


def coerce_value(where: str, value: Any, typ: Any) -> Any:
    """Convert `value` to `typ` (int, float, bool, str, or Optional of those)."""
    origin = typing.get_origin(typ)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        if value is None:
            return None
        typ = args[0]
    if typing.get_origin(typ) is typing.Literal:   # a closed set of names: the `choices` check says which
        typ = type(typing.get_args(typ)[0])
    if isinstance(value, str) and typ is not str:
        value = parse_scalar(value)
    if typ is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where} must be true or false, got {value!r}")
    if typ is int:  # NumPy's scalars count as numbers too
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        if isinstance(value, numbers.Integral):
            return int(value)
        number = float(value)
        if not math.isfinite(number) or number != int(number):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        return int(number)
    if typ is float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        return float(value)
    if typ is str:
        return str(value)
    return value


def set_field(cfg: Any, name: str, value: Any, prefix: str = "") -> Any:
    """Return a copy of dataclass `cfg` with `name` set to `value` (coerced)."""
    where = f"{prefix}{name}"
    fs = fields(cfg)
    if name not in fs:
        raise unknown_name(f"config field{' of ' + prefix.rstrip('.') if prefix else ''}", name, fs)
    return dataclasses.replace(cfg, **{name: coerce_value(where, value, _type_of(type(cfg), name))})


def check(cfg: Any, prefix: str = "") -> None:
    """Validate every field of dataclass `cfg` against its declared range/choices."""
    for f in dataclasses.fields(cfg):
        meta = f.metadata
        value = getattr(cfg, f.name)
        where = f"{prefix}{f.name}"
        if value is None:
            continue
        choices = meta.get("choices")
        if choices is not None and value not in choices:
            hint = did_you_mean(value, choices) or ";"
            raise ConfigError(f"{where}={value!r} is not allowed{hint} valid choices: {', '.join(map(str, choices))}")
        wrong = meta["rule"](value) if meta.get("rule") else None
        if wrong:
            raise ConfigError(f"{where}={value!r} is not allowed: {wrong}")
        lo, hi = meta.get("min"), meta.get("max")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise ConfigError(f"{where}={value!r} must be finite")
            if lo is not None and (value < lo or (meta.get("min_exclusive") and value == lo)):
                op = ">" if meta.get("min_exclusive") else ">="
                raise ConfigError(f"{where}={value!r} is out of range; it must be {op} {lo}"
                                  + (f" and <= {hi}" if hi is not None else ""))
            if hi is not None and value > hi:
                raise ConfigError(f"{where}={value!r} is out of range; it must be <= {hi}"
                                  + (f" and >= {lo}" if lo is not None else ""))


def describe(cfg_cls: type, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(name, default, help) for every field, for `--help` listings."""
    out = []
    for f in dataclasses.fields(cfg_cls):
        meta = f.metadata
        extra = ""
        if meta.get("choices"):
            extra = f" [{'|'.join(map(str, meta['choices']))}]"
        out.append((f"{prefix}{f.name}", f.default, meta.get("help", "") + extra))
    return out


def parse_numbers(value: str) -> tuple[float, ...]:
    """`"0.7:0.3"` (or `"0.7,0.3"`) -> (0.7, 0.3); ConfigError naming the value otherwise."""
    parts = [p for p in str(value).replace(",", ":").split(":")]
    try:
        out = tuple(float(p) for p in parts)
    except ValueError:
        raise ConfigError(f"{value!r} is not a list of numbers; write one number per objective, separated by "
                          "':' (e.g. 0.7:0.3)") from None
    return out


def number_list(value: str) -> str | None:
    """What is wrong with `value` as numbers separated by ':' (None: nothing)."""
    try:
        parse_numbers(value)
    except ConfigError as e:
        return str(e)
    return None
