"""Test-session settings: the compilation cache, the order the tests run in, and a
check that the tests of one `xdist_group` share a worker.

JAX's persistent compilation cache, shared by the test workers of one session
and by the processes they start (CLI subprocesses, Ray workers): many tests
compile the same programs (one trainer config in a learning test and its resume
test, the same matches in several tournaments, a sweep trial resumed in a new
worker), and a program compiled by one process is then read back by the others
instead of compiled again. The cache lives in pytest's cache directory unless
`JAX_COMPILATION_CACHE_DIR` is set.
"""

import os
from pathlib import Path

# The operations the tests run op by op, and the programs they compile themselves with
# `jax.jit`, are compiled without machine-code optimisation, as coplay compiles the programs it
# runs once (`coplay.core.compile`): each runs once or a few times. coplay's own programs carry
# their options (`compiler_options`), which take precedence over this flag, so they are tested
# as they ship. Set before JAX starts its CPU backend; processes the tests start inherit it.
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()

# One torch thread per test worker: pytest-xdist starts a worker per core (`-n auto`), and
# torch would start a thread per core in every worker, so that N workers' threads fight over
# N cores (the two slow language-model tests took 132 s each side by side on 2 cores, 27 and
# 23 s with one thread each). Set before torch starts; processes a worker starts inherit it.
# XLA keeps its threads: one per worker made the JAX learning tests slower, and it breaks the
# tests that split the CPU into several devices.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import jax  # noqa: E402
import pytest  # noqa: E402

# Every program is cached, however fast it compiles: the environment contract and the
# PettingZoo API tests compile hundreds of small programs, most of them more than once
# across the workers and the environments of one class; caching them all took those two
# files from 121 s to 93 s on 2 cores (a threshold of 0.5 s against none).
MIN_COMPILE_SECONDS = 0.0


def pytest_configure(config):
    cache = os.environ.get("JAX_COMPILATION_CACHE_DIR") or str(Path(config.rootpath) / ".pytest_cache" / "jax")
    # Set in the environment too, so that processes started by the tests use the same cache.
    os.environ["JAX_COMPILATION_CACHE_DIR"] = cache
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = str(MIN_COMPILE_SECONDS)
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)


def pytest_collection_modifyitems(config, items):
    """Tests marked `slow` run first (otherwise in file order): the workers take tests in
    this order, so the long ones start together at the beginning instead of one of them
    starting last and running alone while the other workers have nothing left."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_runtest_setup(item):
    """On an xdist worker under `--dist loadgroup`, every test marked `xdist_group` must
    carry its group in its id (pytest-xdist adds it at collection): the controller sends a
    group's tests to one worker by that suffix. Without it the groups are ignored without
    a word, and tests that share a Ray instance or a compiled program run apart, each
    paying for its own; such tests fail here, saying why."""
    config = item.config
    if hasattr(config, "workerinput") and config.getvalue("loadgroup") and \
            item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
        pytest.fail(f"pytest {pytest.__version__} with this pytest-xdist ignores xdist_group (the group is not in "
                    "the test's id); install the pytest that pyproject.toml's dev extra names", pytrace=False)
