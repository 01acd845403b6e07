"""Shared test setup: real JAX (the oracle) sees 8 CPU devices, like meshsim."""
import os

import pytest

# Must be set before JAX initialises its backend, i.e. before any test imports it.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


@pytest.fixture(scope="session")
def real_jax():
    """The installed JAX, to compare against (skips the test if it is missing)."""
    return pytest.importorskip("jax")
