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


__all__ = ["MissingExtraError", "require"]
