"""Shared test setup: real JAX (the oracle) sees 8 CPU devices, like meshsim;
random test data does not depend on the process or on which tests ran before."""
import os
import zlib

import numpy as np
import pytest

import x64_mode

try:
    from hypothesis import settings
except ImportError:  # only the property tests need it; they skip without it
    settings = None

# Must be set before JAX initialises its backend, i.e. before any test imports it.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


@pytest.fixture(scope="session")
def real_jax():
    """The installed JAX, to compare against (skips the test if it is missing)."""
    return pytest.importorskip("jax")


@pytest.fixture
def x64():
    """meshsim in 64-bit mode for the test (tests/x64_mode.py)."""
    import meshsim

    with x64_mode.x64(meshsim):
        yield


@pytest.fixture
def x64_with_jax(real_jax):
    """meshsim and real JAX both in 64-bit mode for the test."""
    import meshsim

    with x64_mode.x64(meshsim, real_jax):
        yield


@pytest.fixture(autouse=True)
def _module_rng_restarts_for_each_test(request):
    """A module's shared generator (its global RNG) restarts from the test's own
    name, so a test draws the same data alone, in a subset or in the full suite,
    whatever ran before it. Reseeded in place: helpers bind it as a default."""
    rng = getattr(request.module, "RNG", None)
    if isinstance(rng, np.random.Generator):
        seed = zlib.crc32(f"{request.module.__name__}::{request.node.name}".encode())
        rng.bit_generator.state = type(rng.bit_generator)(seed).state

# Property tests draw the same examples in every run and on every machine: a CI
# failure replays locally, and no example database carries state between runs.
if settings is not None:
    settings.register_profile("deterministic", derandomize=True, database=None)
    settings.load_profile("deterministic")
