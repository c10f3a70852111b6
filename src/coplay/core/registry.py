"""Name -> constructor registries for environments and algorithms.

Keyword arguments are checked against the constructor's signature before it is
called, so `make("spread", n_agent=4)` fails with the list of valid names
rather than a bare TypeError deep inside."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coplay.core.errors import ConfigError, unknown_name


@dataclass(frozen=True)
class Entry:
    name: str
    factory: Callable[..., Any]
    kind: str
    description: str


class Registry:
    def __init__(self, what: str):
        self.what = what
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, factory: Callable[..., Any], *, kind: str, description: str) -> None:
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is already registered")
        self._entries[name] = Entry(name, factory, kind, description)

    def get(self, name: str) -> Entry:
        if name not in self._entries:
            raise unknown_name(self.what, name, self._entries)
        return self._entries[name]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def entries(self) -> list[Entry]:
        return [self._entries[n] for n in self.names()]

    def parameters(self, name: str) -> dict[str, Any]:
        """The constructor's keyword parameters and their defaults."""
        sig = inspect.signature(self.get(name).factory)
        return {
            p.name: p.default
            for p in sig.parameters.values()
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        }

    def make(self, name: str, **kwargs: Any) -> Any:
        params = self.parameters(name)
        for key in kwargs:
            if key not in params:
                raise unknown_name(f"argument of {self.what} {name!r}:", key, params)
        try:
            return self.get(name).factory(**kwargs)
        except TypeError as e:  # e.g. a value of the wrong type reaching arithmetic
            raise ConfigError(f"{self.what} {name!r} rejected its arguments {kwargs}: {e}") from e

    def __contains__(self, name: str) -> bool:
        return name in self._entries


ENVS = Registry("environment")
