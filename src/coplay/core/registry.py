"""Name -> constructor registries for environments, algorithms and solvers.

Keyword arguments are checked against the constructor's signature before it is
called, so `make("spread", n_agent=4)` fails with the list of valid names
rather than a bare TypeError deep inside. An entry registered with a `config`
class (algorithms, solvers) takes its parameters from that dataclass's fields
instead, and may carry `capabilities`: what it can be used on.

Besides single names, a registry can hold prefixes that open a whole catalogue
from another library: with `register_prefix("pgx", factory)`, the name
`pgx:othello` means `factory("othello", **kwargs)`. `get`, `make`,
`parameters` and `in` resolve such names like registered ones."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from coplay.core.config import as_tuples, coerce_value, parse_scalar, parse_sequence
from coplay.core.errors import ConfigError, CoplayError, RegistryError, UnknownNameError, unknown_name

SEPARATOR = ":"


@dataclass(frozen=True)
class Entry:
    name: str
    factory: Callable[..., Any]
    kind: str
    description: str
    config: type | None = None      # the entry's config dataclass, where it has one
    capabilities: Any = None        # what the entry can be used on (algorithms: algos.base.Capabilities)
    engine: str | None = None       # what runs it, one of the registry's `engines` (algorithms: compiled, host)


@dataclass(frozen=True)
class Prefix:
    """`prefix:rest` names: `factory(rest, **kwargs)` builds one; `choices()`,
    where given, lists the valid `rest`s (it may import an optional library);
    `parameters(rest)`, where given, lists a name's keyword parameters and
    defaults when the factory takes them as `**kwargs`."""

    prefix: str
    factory: Callable[..., Any]
    kind: str
    description: str
    choices: Callable[[], Iterable[str]] | None = None
    parameters: Callable[[str], dict[str, Any]] | None = None


class Registry:
    def __init__(self, what: str, engines: tuple[str, ...] = ()):
        self.what = what
        self.engines = engines   # the closed set an entry's `engine` is one of; () where entries name none
        self._entries: dict[str, Entry] = {}
        self._prefixes: dict[str, Prefix] = {}

    def register(self, name: str, factory: Callable[..., Any], *, kind: str, description: str,
                 config: type | None = None, capabilities: Any = None, engine: str | None = None) -> None:
        if name in self._entries:
            raise RegistryError(f"{self.what} {name!r} is already registered")
        if (engine is None) != (not self.engines) or (engine is not None and engine not in self.engines):
            raise RegistryError(f"{self.what} {name!r}: engine={engine!r}; the engines of this registry: "
                                f"{', '.join(self.engines) or 'none'}")
        self._entries[name] = Entry(name, factory, kind, description, config, capabilities, engine)

    def register_prefix(self, prefix: str, factory: Callable[..., Any], *, kind: str, description: str,
                        choices: Callable[[], Iterable[str]] | None = None,
                        parameters: Callable[[str], dict[str, Any]] | None = None) -> None:
        """Make every `prefix:rest` name resolve to `factory(rest, **kwargs)`.
        The factory's first parameter takes `rest`; its keyword parameters are
        the name's parameters."""
        if not prefix or SEPARATOR in prefix:
            raise RegistryError(f"prefix {prefix!r} must be non-empty and contain no {SEPARATOR!r}")
        if prefix in self._prefixes:
            raise RegistryError(f"{self.what} prefix {prefix!r} is already registered")
        self._prefixes[prefix] = Prefix(prefix, factory, kind, description, choices, parameters)

    def get(self, name: str) -> Entry:
        if name in self._entries:
            return self._entries[name]
        if isinstance(name, str) and SEPARATOR in name:
            prefix, rest = name.split(SEPARATOR, 1)
            if prefix in self._prefixes:
                return self._resolve(self._prefixes[prefix], name, rest)
        raise self._unknown(name)

    def _resolve(self, p: Prefix, name: str, rest: str) -> Entry:
        if p.choices is not None:
            under = p.prefix + SEPARATOR
            valid = sorted({*p.choices(), *(n[len(under):] for n in self._entries if n.startswith(under))})
            if rest not in valid:
                raise unknown_name(f"{self.what} under prefix {p.prefix + SEPARATOR!r}:", rest, valid)
        elif not rest:
            raise UnknownNameError(f"{self.what} name {name!r} has nothing after {p.prefix + SEPARATOR!r}")
        return Entry(name, functools.partial(p.factory, rest), p.kind, p.description)

    def _unknown(self, name: str) -> UnknownNameError:
        err = unknown_name(self.what, name, self._entries)
        if not self._prefixes:
            return err
        forms = ", ".join(f"{p}{SEPARATOR}<name>" for p in sorted(self._prefixes))
        return UnknownNameError(f"{err}; or a prefixed name: {forms}")

    def names(self) -> list[str]:
        return sorted(self._entries)

    def items(self) -> list[tuple[str, Entry]]:
        return [(n, self._entries[n]) for n in self.names()]

    def entries(self) -> list[Entry]:
        return [self._entries[n] for n in self.names()]

    def prefixes(self) -> list[Prefix]:
        return [self._prefixes[p] for p in sorted(self._prefixes)]

    def parameters(self, name: str) -> dict[str, Any]:
        """The entry's parameters and their defaults: its config's fields where it has
        a config class, else the constructor's keyword parameters."""
        entry = self._entries.get(name)
        if entry is not None and entry.config is not None:
            return {f.name: f.default for f in dataclasses.fields(entry.config)}
        if SEPARATOR in name and name not in self._entries:
            prefix, rest = name.split(SEPARATOR, 1)
            p = self._prefixes.get(prefix)
            if p is not None and p.parameters is not None:
                self.get(name)
                return dict(p.parameters(rest))
        sig = inspect.signature(self.get(name).factory)
        return {
            p.name: p.default
            for p in sig.parameters.values()
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        }

    def unknown_argument(self, name: str, key: str, params: dict[str, Any], where: str = "") -> ConfigError:
        """The error for argument `key`, which entry `name` (taking `params`) does not take."""
        if not params:
            return ConfigError(f"{self.what} {name!r} takes no arguments; got {where}{key}")
        return unknown_name(f"argument of {self.what} {name!r}:", key, params)

    def arguments(self, name: str, values: dict[str, Any], where: str = "") -> dict[str, Any]:
        """`values` checked against entry `name`'s parameters, each read as its default's
        type (so command-line strings work, and a value of the wrong type is refused
        naming `where` + the parameter); a parameter whose default is a sequence, or a
        text in brackets, is read as a sequence (`[[3,0],[5,1]]`); other parameters
        without a typed default take a number, bool or none read from text, or any value."""
        params = self.parameters(name)
        out = {}
        for key, value in values.items():
            if key not in params:
                raise self.unknown_argument(name, key, params, where)
            default = params[key]
            typ = type(default) if default is not None and not isinstance(default, (list, tuple, dict)) else None
            if typ in (int, float, bool, str):
                out[key] = coerce_value(f"{where}{key}", value, typ)
            elif isinstance(value, str) and (isinstance(default, (list, tuple))
                                             or value.lstrip().startswith(("[", "("))):
                out[key] = parse_sequence(f"{where}{key}", value)
            elif isinstance(value, (list, tuple)):
                out[key] = as_tuples(value)
            else:
                out[key] = parse_scalar(value) if isinstance(value, str) else value
        return out

    def make(self, name: str, **kwargs: Any) -> Any:
        if not isinstance(name, str):
            raise ConfigError(f"{self.what} names are strings, got {type(name).__name__} {name!r}")
        kwargs = self.arguments(name, kwargs)
        try:
            return self.get(name).factory(**kwargs)
        except CoplayError:   # the factory's own error, which names the value already
            raise
        except (TypeError, ValueError) as e:  # a value of the wrong type or form reaching arithmetic
            raise ConfigError(f"{self.what} {name!r} rejected its arguments {kwargs}: {e}") from e

    def __contains__(self, name: str) -> bool:
        try:
            self.get(name)
        except CoplayError:  # unknown, or its optional library is not installed
            return False
        return True


ENVS = Registry("environment")
