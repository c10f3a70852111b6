"""Bridges between coplay's environment contract and other libraries.

Each bridge lives in its own module and imports its library only when an
environment is built, so `import coplay` works without any of them; a missing
library raises `MissingExtraError`, which names the extra to install.

    pgx          pgx's game catalogue as coplay environments (`coplay[games]`)
    pettingzoo   coplay environments as PettingZoo parallel and AEC environments
                 (`to_pettingzoo`; `coplay[pettingzoo]`)
    pettingzoo_host  PettingZoo environments as coplay environments, stepped on
                 the host (`from_pettingzoo`, `pettingzoo:<module>`)
    gymnasium    single-agent Gymnasium environments as coplay environments
                 (`from_gymnasium`, `gym:<id>`) and back (`to_gymnasium`)
    layout       how gymnasium spaces of named agents map onto coplay's arrays
    extras       `require`: an optional library, or the extra that installs it
    host         the machinery of host-stepped environments (a pool of copies
                 reached through `jax.pure_callback`)
"""

from __future__ import annotations

from coplay.interop.extras import MissingExtraError, require

# Bridges whose modules import their library lazily can be offered here directly.
from coplay.interop.gymnasium import from_gymnasium, to_gymnasium  # noqa: E402
from coplay.interop.pettingzoo import to_pettingzoo  # noqa: E402
from coplay.interop.pettingzoo_host import from_pettingzoo  # noqa: E402

__all__ = ["MissingExtraError", "from_gymnasium", "from_pettingzoo", "require", "to_gymnasium", "to_pettingzoo"]
