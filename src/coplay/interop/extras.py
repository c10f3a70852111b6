"""Optional libraries: imported on use, or refused naming the extra that installs them."""

from __future__ import annotations

import importlib
from types import ModuleType

from coplay.core.errors import MissingExtraError


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import `module`, or raise MissingExtraError telling how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(
            f"{feature} needs the {module!r} package, which is not installed: "
            f"pip install coplay[{extra}]  ({e})"
        ) from e


def require_release(dist: str, version: str, supported: tuple[int, int], supported_text: str, feature: str,
                    extra: str) -> None:
    """Refuse a release of `dist` other than the `supported` (major, minor) that `feature` was
    written for, naming the releases it takes and how to install them."""
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if parts != supported:
        raise MissingExtraError(
            f"{dist} {version} is installed; {feature} is written for {dist} {supported_text}: "
            f"pip install '{dist}{supported_text}' (or pip install coplay[{extra}])")


__all__ = ["MissingExtraError", "require", "require_release"]
