"""`jax.config` as JAX 0.10.2 keeps it: every option both packages have is set through
`config.update` to values of several types and read back (`config.<name>`, `config.read`),
comparing what is stored (enum options read back as JAX's enum members), and the exception
type and text when JAX refuses the value."""
import numpy as np
import pytest

import meshsim

RNG = np.random.default_rng(0)

# Options whose setting reaches past the value itself: those fixed once the backend starts
# (the device count, platforms, the CPU topology timeouts), dispatch, and the default device
# (an object of either package).
_NOT_SWEPT = {"jax_num_cpu_devices", "jax_platforms", "jax_cpu_enable_async_dispatch",
              "jax_default_device", "jax_cpu_get_global_topology_timeout_minutes",
              "jax_cpu_get_local_topology_timeout_minutes"}
_VALUES = ["bogus", 1, 0, -3, 1.5, None, True, False, "off", "OFF", "On", "strict", "STRICT",
           "allow", "warn", "Warn", "ERROR", "O2", "raise", "ignore", "auto", "DEBUG", "gloo",
           "rbg", "highest"]


def _outcome(action):
    try:
        return "ok", _shown(action())
    except Exception as e:  # noqa: BLE001 - the type and text are what is compared
        return type(e).__name__, str(e)


def _shown(value):
    """What a program sees of a stored value: its repr, its type's name, and whether it is
    a string or a number (JAX's enum members are)."""
    return repr(value), type(value).__name__, isinstance(value, str), isinstance(value, int)


def _set_and_read(config, name, value):
    original = config.values[name]
    try:
        update = _outcome(lambda: config.update(name, value))
        return (update, _outcome(lambda: config.read(name)),
                _outcome(lambda: getattr(config, name)))
    finally:
        config.update(name, original)


def _swept_names(real_jax):
    ours = set(meshsim.config.values)
    return sorted(n for n in real_jax.config.values if n in ours and n not in _NOT_SWEPT)


def test_every_option_stores_and_checks_values_as_jax(real_jax):
    real_jax.devices()  # the backend started, whatever ran before
    names = _swept_names(real_jax)
    assert len(names) > 100
    mismatches = []
    for name in names:
        assert _outcome(lambda: meshsim.config.read(name)) == \
            _outcome(lambda: real_jax.config.read(name)), name
        for value in RNG.permutation(np.array(_VALUES, dtype=object))[:8]:
            ours = _set_and_read(meshsim.config, name, value)
            theirs = _set_and_read(real_jax.config, name, value)
            if ours != theirs:
                mismatches.append((name, value, ours, theirs))
    assert not mismatches, "\n".join(map(str, mismatches))


@pytest.mark.parametrize("name, members", [
    ("jax_numpy_dtype_promotion", ["standard", "strict"]),
    ("jax_legacy_prng_key", ["allow", "warn", "error"]),
    ("jax_send_traceback_to_runtime", ["off", "on", "full"]),
])
def test_enum_options_read_back_as_members(real_jax, name, members):
    """A string sets the member with that value; the member reads back (equal to its string),
    also through the option's context manager where JAX has one."""
    for value in RNG.permutation(members):
        ours = _set_and_read(meshsim.config, name, str(value))
        assert ours == _set_and_read(real_jax.config, name, str(value))
        assert ours[2][1][0].endswith(f": '{value}'>")
    flag = name[len("jax_"):]
    if hasattr(real_jax, flag):
        with getattr(meshsim, flag)("strict" if "promotion" in name else "error"):
            got = getattr(meshsim.config, name)
        with getattr(real_jax, flag)("strict" if "promotion" in name else "error"):
            want = getattr(real_jax.config, name)
        assert _shown(got) == _shown(want)


def test_strict_promotion_set_by_string_or_member(real_jax):
    import meshsim.numpy as mnp
    x, y = np.ones(3, np.float32), np.ones(3, np.int32)
    for value in ["strict", type(real_jax.config.jax_numpy_dtype_promotion)("strict")]:
        meshsim.config.update("jax_numpy_dtype_promotion", str(value))
        try:
            with pytest.raises(meshsim.dtypes.TypePromotionError):
                mnp.add(x, y)
        finally:
            meshsim.config.update("jax_numpy_dtype_promotion", "standard")
    assert mnp.add(x, y).dtype == np.float32


def test_platforms_must_be_a_string(real_jax):
    for config in (meshsim.config, real_jax.config):
        original = config.values["jax_platforms"]
        try:
            got = _outcome(lambda: config.update("jax_platforms", 1))
        finally:
            config.update("jax_platforms", original)
        if config is meshsim.config:
            ours = got
    assert ours == got
