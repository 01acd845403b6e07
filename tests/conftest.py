"""Shared test setup: real JAX (the oracle) sees 8 CPU devices, like meshsim."""
import os

import pytest

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

# Property tests draw the same examples in every run and on every machine: a CI
# failure replays locally, and no example database carries state between runs.
if settings is not None:
    settings.register_profile("deterministic", derandomize=True, database=None)
    settings.load_profile("deterministic")
