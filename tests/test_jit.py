"""jit and make_jaxpr: tracing once per signature, static and donated arguments."""
import re

import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp


def _counting(fn):
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    return wrapped, calls


def test_traced_once_per_signature():
    f, calls = _counting(lambda x, y: x * y + x)
    jf = jax.jit(f)
    a = jnp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    for _ in range(3):
        out = jf(a, a)
    assert len(calls) == 1
    np.testing.assert_allclose(np.asarray(out), np.asarray(a) ** 2 + np.asarray(a))
    jf(jnp.asarray(np.ones((4,), np.float32)), jnp.asarray(np.ones((4,), np.float32)))
    assert len(calls) == 2  # new shape, new trace
    jf(jnp.asarray(np.ones((4,), np.int32)), jnp.asarray(np.ones((4,), np.int32)))
    assert len(calls) == 3  # new dtype, new trace
    assert jf.trace_count() == 3


def test_python_scalars_are_weakly_typed_arguments():
    jf = jax.jit(lambda x, s: x * s)
    x = jnp.asarray(np.ones(3, np.float32))
    out = jf(x, 2)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(out), [2, 2, 2])
    assert np.asarray(jf(x, 3)).tolist() == [3, 3, 3]
    assert jf.trace_count() == 1  # value of a scalar is not part of the signature


def test_static_argnums_and_argnames():
    f, calls = _counting(lambda x, n, scale=1: x * n * scale)
    jf = jax.jit(f, static_argnums=1, static_argnames="scale")
    x = jnp.asarray(np.ones(2, np.float32))
    assert np.asarray(jf(x, 2)).tolist() == [2, 2]
    assert np.asarray(jf(x, 2)).tolist() == [2, 2]
    assert np.asarray(jf(x, 3)).tolist() == [3, 3]
    assert np.asarray(jf(x, 3, scale=2)).tolist() == [6, 6]
    assert len(calls) == 3


def test_unhashable_static_argument_is_an_error():
    jf = jax.jit(lambda x, n: x, static_argnums=1)
    with pytest.raises(ValueError, match="hashable"):
        jf(jnp.asarray(np.ones(2, np.float32)), [1, 2])


def test_pytree_arguments_and_results():
    @jax.jit
    def f(params, x):
        return {"y": x @ params["w"], "n": params["b"] + 1}

    params = {"w": jnp.asarray(np.eye(3, dtype=np.float32)), "b": jnp.asarray(np.zeros(3, np.float32))}
    out = f(params, jnp.asarray(np.arange(3, dtype=np.float32)))
    assert set(out) == {"y", "n"}
    np.testing.assert_array_equal(np.asarray(out["y"]), [0, 1, 2])


def test_donated_argument_cannot_be_reused():
    jf = jax.jit(lambda x: x + 1, donate_argnums=0)
    x = jnp.asarray(np.ones(3, np.float32))
    y = jf(x)
    assert x.is_deleted()
    np.testing.assert_array_equal(np.asarray(y), [2, 2, 2])
    with pytest.raises(RuntimeError, match=re.escape("Array has been deleted with shape=float32[3].")):
        np.asarray(x)


def test_side_effects_happen_at_trace_time(capsys):
    @jax.jit
    def f(x):
        print(jax.typeof(x))
        return x * 2

    x = jnp.asarray(np.ones((2, 3), np.float32))
    f(x)
    f(x)
    assert capsys.readouterr().out.strip().splitlines() == ["float32[2,3]"]


def test_tracer_cannot_become_python_bool():
    @jax.jit
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(jax.errors.TracerBoolConversionError,
                       match=r"Attempted boolean conversion of traced array with shape bool\[\]"):
        f(jnp.asarray(np.ones(3, np.float32)))


def test_make_jaxpr_prints_the_program():
    jaxpr = jax.make_jaxpr(lambda x, y: jnp.sin(x) * y)(
        jnp.asarray(np.ones(3, np.float32)), jnp.asarray(np.ones(3, np.float32)))
    text = str(jaxpr)
    assert text.startswith("{ lambda ; a:f32[3] b:f32[3]. let")
    assert "c:f32[3] = sin a" in text
    assert "d:f32[3] = mul c b" in text
    assert text.rstrip().endswith("in (d,) }")


def test_nested_jit_is_inlined():
    inner = jax.jit(lambda x: x + 1)
    outer = jax.jit(lambda x: inner(x) * 2)
    out = outer(jnp.asarray(np.zeros(2, np.float32)))
    np.testing.assert_array_equal(np.asarray(out), [2, 2])


def test_escaped_tracer_is_an_error():
    leaked = []

    @jax.jit
    def f(x):
        leaked.append(x)
        return x

    f(jnp.asarray(np.ones(2, np.float32)))
    with pytest.raises(jax.errors.UnexpectedTracerError, match="unexpected tracer"):
        leaked[0] + 1


def test_all_array_calls_take_the_cached_path_with_any_output_tree():
    # Calls with only positional Arrays skip flattening; outputs of every tree shape still unflatten.
    x = jnp.asarray(np.arange(3, dtype=np.float32))
    for fn, check in [
        (lambda a: a + 1, lambda out: np.asarray(out).tolist() == [1, 2, 3]),
        (lambda a: None, lambda out: out is None),
        (lambda a: (a, {"b": a * 2}), lambda out: np.asarray(out[1]["b"]).tolist() == [0, 2, 4]),
        (lambda a: [a.sum()], lambda out: isinstance(out, list) and float(out[0]) == 3.0),
    ]:
        jf = jax.jit(fn)
        assert check(jf(x)) and check(jf(x))
        assert jf.trace_count() == 1


def test_cached_path_keys_on_the_full_type():
    f, calls = _counting(lambda x: x * 2)
    jf = jax.jit(f)
    jf(jnp.asarray(np.ones(3, np.float32)))
    jf(jnp.ones(3))  # same type, another array: no new trace
    jf(jnp.asarray(np.ones(3, np.int32)))
    jf(jnp.asarray(np.ones((3, 1), np.float32)))
    assert len(calls) == 3
    jf(jnp.asarray(2.0))  # weakly typed float32[]
    jf(jnp.asarray(np.float32(3)))  # float32[], strongly typed: a new trace
    assert len(calls) == 5
    # A mixed call (an Array and a NumPy array) after an all-Array one reuses the trace.
    jg = jax.jit(lambda a, b: a + b)
    x = jnp.ones(3)
    jg(x, x)
    jg(x, np.ones(3, np.float32))
    assert jg.trace_count() == 1


def test_deleted_array_argument_is_an_error_on_the_cached_path():
    jf = jax.jit(lambda x: x + 1)
    x = jnp.asarray(np.ones(3, np.float32))
    jf(x)
    jax.jit(lambda x: x * 2, donate_argnums=0)(x)
    with pytest.raises(ValueError, match="Buffer has been deleted or donated"):
        jf(x)


JIT_VARIANTS = {
    # each: the jits made from one function, called in turn on the arguments given
    "same_options": lambda jit, f: [jit(f), jit(f), jit(f, static_argnums=())],
    "new_shape": lambda jit, f: [jit(f), jit(f), "wider"],
    "donation_only": lambda jit, f: [jit(f), jit(f, donate_argnums=0)],
    "static_argument": lambda jit, f: [jit(f), jit(f, static_argnums=1)],
    "static_by_name": lambda jit, f: [jit(f, static_argnames="scale"), jit(f, static_argnames=("scale",))],
    "wrapper_per_call": lambda jit, f: [jit(lambda x, scale: f(x, scale)),
                                        jit(lambda x, scale: f(x, scale))],
}


@pytest.mark.parametrize("name", sorted(JIT_VARIANTS))
def test_jits_of_one_function_share_traces_as_in_jax(name, real_jax):
    """`jit(f)` made again (as notebooks do cell after cell) traces `f` again only when JAX
    does: the count of Python side effects during tracing is JAX's."""
    def run(lib):
        traced = []

        def f(x, scale=2):
            traced.append(str(lib.typeof(x)))
            return x * scale

        x = lib.numpy.ones(3)
        outs = []
        for j in JIT_VARIANTS[name](lib.jit, f):
            if j == "wider":
                j, x = lib.jit(f), lib.numpy.ones(5)
            outs.append(np.asarray(j(x, 3)).tolist())
        return traced, outs

    assert run(jax) == run(real_jax)
