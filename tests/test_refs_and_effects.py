"""Mutable references (`jax.new_ref`, `jax.Ref`, `jax.freeze`), `jax.experimental.io_callback`,
`jax.ensure_compile_time_eval` and the `device=` of jnp's creation functions, against JAX 0.10.2
(8 CPU devices): printed values, results, types and error texts."""
import contextlib
import io

import numpy as np
import pytest

import meshsim


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _run(jax, case):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            result = ("ok", case(jax))
        except Exception as e:  # noqa: BLE001 - the class name and text are compared
            result = (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        jax.effects_barrier()
    return out.getvalue(), result


def _same(libs, case):
    (ours, r1), (theirs, r2) = (_run(lib, case) for lib in libs)
    assert ours == theirs
    assert r1[0] == r2[0], (r1, r2)
    if r1[0] == "ok":
        for a, b in zip(meshsim.tree.leaves(r1[1]), meshsim.tree.leaves(r2[1])):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    else:
        assert r1 == r2
    return ours


def test_ref_reads_writes_and_prints(libs):
    def case(jax):
        jnp = jax.numpy
        r = jax.new_ref(jnp.arange(6.0).reshape(2, 3))
        print(type(r).__name__, r, jax.typeof(r), r.shape, r.dtype, isinstance(r, jax.Ref))
        print(r[...], r[1], r[0, 2])
        r[...] = jnp.ones((2, 3))
        r[1] = jnp.full((3,), 4.0)
        r[0, 1:] = jnp.zeros(2)
        r[...] += 1
        r.addupdate(jnp.ones((2, 3)))
        print(r, jax.tree.leaves({"r": r}))
        try:
            r.addupdate(jnp.arange(3.0))
        except ValueError as e:
            print(e)
        return jax.freeze(r)

    _same(libs, case)


@pytest.mark.parametrize("value", ["scalar", "short", "int", "int_scalar"])
def test_ref_writes_of_the_wrong_shape_or_dtype(libs, value):
    def case(jax):
        jnp = jax.numpy
        r = jax.new_ref(jnp.arange(4.0))
        v = {"scalar": 3.0, "short": jnp.ones(3), "int": jnp.ones(4, jnp.int32), "int_scalar": 8}[value]
        if value == "int_scalar":
            r[1] = v
        else:
            r[...] = v

    _same(libs, case)


def test_jitted_function_mutates_its_ref_arguments(libs):
    def case(jax):
        jnp = jax.numpy
        r = jax.new_ref(jnp.arange(4.0))
        counter = jax.new_ref(jnp.int32(0))

        @jax.jit
        def step(state, x):
            state["r"][...] = state["r"][...] * 2 + x
            state["n"][...] += 1
            return state["r"][...].sum()

        outs = [step({"r": r, "n": counter}, float(i)) for i in range(3)]

        @jax.jit
        def only_writes(r, v):
            r[1:3] = v

        print(only_writes(r, jnp.zeros(2)))
        return outs, r[...], counter[...]

    _same(libs, case)


def test_refs_made_inside_a_traced_function(libs):
    def case(jax):
        jnp = jax.numpy

        def f(x):
            acc = jax.new_ref(jnp.zeros(()))
            for i in range(x.shape[0]):
                acc[...] += x[i] ** 2
            return acc[...]

        x = jnp.arange(5.0)
        return f(x), jax.jit(f)(x), jax.grad(f)(x), jax.vmap(f)(jnp.stack([x, x + 1]))

    _same(libs, case)


def test_io_callback_runs_every_time_and_refuses_jvp(libs):
    def case(jax):
        io_callback = jax.experimental.io_callback
        jnp = jax.numpy
        seen = []

        def log(x):
            seen.append(np.asarray(x).tolist())
            return np.asarray(x) * 2

        f = jax.jit(lambda x: io_callback(log, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1)
        a = f(jnp.arange(3.0))
        b = f(jnp.arange(3.0))
        c = jax.vmap(lambda x: io_callback(log, jax.ShapeDtypeStruct(x.shape, x.dtype), x))(
            jnp.arange(6.0).reshape(2, 3))
        jax.effects_barrier()
        print(seen)
        return a, b, c

    _same(libs, case)


@pytest.mark.parametrize("how", ["grad", "ordered_vmap"])
def test_io_callback_errors(libs, how):
    def case(jax):
        io_callback = jax.experimental.io_callback
        jnp = jax.numpy

        def f(x, ordered=False):
            return io_callback(lambda v: np.asarray(v), jax.ShapeDtypeStruct(x.shape, x.dtype), x,
                               ordered=ordered)
        if how == "grad":
            return jax.grad(lambda x: f(x).sum())(jnp.arange(3.0))
        return jax.vmap(lambda x: f(x, ordered=True))(jnp.ones((2, 3)))

    _same(libs, case)


def test_ensure_compile_time_eval_gives_concrete_values_inside_jit(libs):
    def case(jax):
        jnp = jax.numpy

        @jax.jit
        def f(x):
            with jax.ensure_compile_time_eval():
                table = jnp.cumsum(jnp.arange(5))
                n = int(table[-1])
                big = bool(jnp.sin(2.0) > 0.5)
                print(n, big, table)
                y = x * 2  # x is traced: still staged
            return y + n

        return f(jnp.arange(3.0))

    _same(libs, case)


def test_ensure_compile_time_eval_runs_nested_jits_on_concrete_operands(libs):
    """A user's jit and the jax.numpy functions JAX writes under jit (where, clip) called on
    concrete operands inside the block give concrete values, not nested jit equations."""
    def case(jax):
        jnp = jax.numpy
        count_big = jax.jit(lambda v: jnp.where(v > 1, v, 0).sum())

        @jax.jit
        def f(x):
            with jax.ensure_compile_time_eval():
                n = int(count_big(jnp.arange(4)))
                m = int(jnp.clip(jnp.arange(5), 1, 3).sum())
                print(n, m)
                y = jnp.where(x > 1, x, 0.0)  # x is traced: still a jit equation
            return y * n + m

        return f(jnp.arange(3.0))

    _same(libs, case)


@pytest.mark.parametrize("fn", ["zeros", "ones", "full", "arange", "eye", "array", "asarray", "linspace",
                                "zeros_like", "empty"])
def test_creation_functions_honour_device(libs, fn):
    def case(jax):
        jnp = jax.numpy
        dev = jax.devices()[3]
        make = {
            "zeros": lambda d: jnp.zeros((2, 3), device=d), "ones": lambda d: jnp.ones(4, device=d),
            "full": lambda d: jnp.full((2,), 7.0, device=d), "arange": lambda d: jnp.arange(5, device=d),
            "eye": lambda d: jnp.eye(3, device=d), "array": lambda d: jnp.array([1.0, 2.0], device=d),
            "asarray": lambda d: jnp.asarray(np.arange(3), device=d),
            "linspace": lambda d: jnp.linspace(0, 1, 5, device=d),
            "zeros_like": lambda d: jnp.zeros_like(np.ones(3), device=d),
            "empty": lambda d: jnp.empty((2,), device=d)}[fn]
        x = make(dev)
        mesh = jax.make_mesh((4,), ("i",))
        y = make(jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))
        print(sorted(d.id for d in x.devices()), x.committed, (x + 1).devices() == {dev},
              type(y.sharding).__name__, len(y.devices()))
        return x

    _same(libs, case)


def _bump_program(jax):
    jnp = jax.numpy
    counter = jax.new_ref(jnp.float32(0))

    @jax.jit
    def bump(x):
        counter[...] += jnp.sum(x)
        return x * 2
    print(bump(jnp.ones(3)), counter)
    print(bump(jnp.ones(3)), counter)
    counter[...] = 10.0  # an eager write between calls: the next call reads it
    print(bump(jnp.ones(2)), counter)
    return counter[...]


def _fori_program(jax, jitted):
    jnp = jax.numpy
    acc = jax.new_ref(jnp.zeros(4))

    def body(i, c):
        acc[i] = acc[i] + c * i
        return c + 1.0
    run = (lambda: jax.lax.fori_loop(0, 4, body, 1.0))
    print((jax.jit(run) if jitted else run)(), acc)
    print((jax.jit(run) if jitted else run)(), acc)
    return acc[...]


def _scan_program(jax, jitted):
    jnp = jax.numpy
    hist = jax.new_ref(jnp.zeros(3, jnp.int32))

    def body(c, x):
        hist[x] += 1
        return c + x, c
    run = (lambda xs: jax.lax.scan(body, 0, xs))
    print((jax.jit(run) if jitted else run)(jnp.array([0, 1, 1, 2, 2, 2])), hist)
    return hist[...]


def _while_body_program(jax):
    jnp = jax.numpy
    total = jax.new_ref(jnp.float32(0))

    def body(c):
        total[...] += c.astype(jnp.float32)
        return c + 1
    print(jax.jit(lambda n: jax.lax.while_loop(lambda c: c < n, body, 0))(5), total)
    return total[...]


def _made_in_jit_program(jax):
    jnp = jax.numpy

    @jax.jit
    def f(x):
        s = jax.new_ref(jnp.zeros(()))

        def body(i, c):
            s[...] += x[i]
            return c
        jax.lax.fori_loop(0, x.shape[0], body, 0)
        return s[...]
    return f(jnp.arange(5.0))


def _nested_program(jax):
    jnp = jax.numpy
    acc = jax.new_ref(jnp.zeros(4))

    @jax.jit
    def f(x):
        def outer(i, c):
            def inner(j, c2):
                acc[j] = acc[j] + x[i] * (j + 1)
                return c2
            return jax.lax.fori_loop(0, 4, inner, c)
        return jax.lax.fori_loop(0, 2, outer, 0)
    f(jnp.array([1.0, 10.0]))
    print(acc)
    return acc[...]


@pytest.mark.parametrize("program", ["bump", "fori", "fori_jit", "scan", "scan_jit", "while_body",
                                     "made_in_jit", "nested"])
def test_writes_into_closed_over_refs(libs, program):
    """Refs a jitted function or a loop body closes over are discharged as JAX does: their
    values go in as inputs (or carry) and their final values are written back."""
    case = {"bump": _bump_program, "fori": lambda jax: _fori_program(jax, False),
            "fori_jit": lambda jax: _fori_program(jax, True),
            "scan": lambda jax: _scan_program(jax, False), "scan_jit": lambda jax: _scan_program(jax, True),
            "while_body": _while_body_program, "made_in_jit": _made_in_jit_program,
            "nested": _nested_program}[program]
    _same(libs, case)


def test_ref_in_while_cond_and_body():
    """JAX refuses a Ref used by both functions of a while loop (it passes it twice); here the
    loop carries it once."""
    jnp = meshsim.numpy
    r = meshsim.new_ref(jnp.float32(1.0))

    def body(c):
        r[...] = r[...] * 3
        return c + 1
    assert int(meshsim.lax.while_loop(lambda c: r[...] < 100.0, body, 0)) == 5
    assert float(r[...]) == 243.0


def test_writes_from_grad_into_closed_over_refs_are_refused():
    jnp = meshsim.numpy
    outer = meshsim.new_ref(jnp.zeros(()))

    def f(x):
        outer[...] = x * 2
        return x * x
    with pytest.raises(Exception, match="performing a set/swap operation with a differentiated value"):
        meshsim.grad(f)(3.0)
    np.testing.assert_array_equal(np.asarray(outer[...]), 0.0)


# Steps of a value written into a closed-over Ref under grad: some keep the dependence on the
# differentiated input, some have a zero derivative (JAX's symbolic zero), some pass the value
# through a conditional or a loop's carry.
_WRITE_STEPS = {
    "sin": lambda jax, v, x: jax.numpy.sin(v),
    "floor": lambda jax, v, x: jax.numpy.floor(v),
    "sign": lambda jax, v, x: jax.numpy.sign(v),
    "round": lambda jax, v, x: jax.numpy.round(v),
    "stop_gradient": lambda jax, v, x: jax.lax.stop_gradient(v),
    "bitcast": lambda jax, v, x: jax.lax.bitcast_convert_type(
        jax.lax.bitcast_convert_type(v, np.int32) + 1, np.float32) * 0.5,
    "constant": lambda jax, v, x: v * 0.0 + 1.0,
    "cond": lambda jax, v, x: jax.lax.cond(v > 0, lambda a: a * 2.0, lambda a: jax.numpy.floor(a), v),
    "cond_of_x": lambda jax, v, x: jax.lax.cond(v > 0, lambda a: a + x, lambda a: a, v),
    "scan_carry": lambda jax, v, x: jax.lax.scan(lambda c, _: (c * v, None), 1.0, None, length=3)[0],
    "scan_ys": lambda jax, v, x: jax.lax.scan(lambda c, _: (c, c + v), 0.0, None, length=2)[1][1],
    "scan_reset": lambda jax, v, x: jax.lax.scan(lambda c, _: (c * 0.0 + 2.0, None), v, None, length=2)[0],
    "while_carry": lambda jax, v, x: jax.lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + c[2], c[2]), (0, 1.0, v))[1],
    "while_reset": lambda jax, v, x: jax.lax.while_loop(
        lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] * 0.0), (0, v))[1],
}


@pytest.mark.parametrize("seed", range(12))
def test_refused_writes_follow_the_derivative(libs, seed):
    """Whether a written value counts as differentiated, as JAX decides it: not after a
    primitive whose derivative is zero, and through conditionals and loops as their
    sub-programs pass it on (a loop's carried result may be its initial value)."""
    rng = np.random.default_rng(seed)
    steps = [str(s) for s in rng.choice(sorted(_WRITE_STEPS), size=int(rng.integers(1, 4)))]
    x0 = float(rng.uniform(-2.0, 2.0))

    def case(jax):
        r = jax.new_ref(jax.numpy.zeros(()))

        def f(x):
            v = x
            for step in steps:
                v = _WRITE_STEPS[step](jax, v, x)
            r[...] = v
            return x * x
        return jax.grad(f)(x0), r[...]
    _same(libs, case)


def _ref_misuse(jax, name):
    jnp = jax.numpy
    r = jax.new_ref(jnp.arange(6.0).reshape(2, 3))

    def returns_arg(x_ref):
        x_ref[...] = x_ref[...] * 2
        return x_ref

    def returns_nested(a, x_ref):
        return {"a": a, "r": [x_ref]}

    def takes_two(x_ref, y_ref):
        return None

    def closes_and_takes(y_ref):
        y_ref[...] = r[...]

    def freezes(x_ref):
        jax.freeze(x_ref)

    cases = {
        "returns_arg": lambda: jax.jit(returns_arg)(r),
        "returns_nested": lambda: jax.jit(returns_nested)(1.0, r),
        "same_ref_twice": lambda: jax.jit(takes_two)(r, r),
        "same_ref_in_pytrees": lambda: jax.jit(takes_two)({"u": r}, [r]),
        "closed_over_and_passed": lambda: jax.jit(closes_and_takes)(r),
        "freeze_argument": lambda: jax.jit(freezes)(r),
        "sin_of_ref": lambda: jnp.sin(r),
        "sum_of_ref": lambda: jnp.sum(r),
        "add_ref": lambda: jnp.add(r, 1.0),
        "advanced_indexing": lambda: (r.__setitem__((jnp.array([1, 0, 1]), jnp.array([0, 0, 2])),
                                                    r[jnp.array([0, 0, 1]), jnp.array([1, 2, 2])]),
                                      jax.freeze(r))[1],
    }
    return cases[name]()


@pytest.mark.parametrize("name", ["returns_arg", "returns_nested", "same_ref_twice", "same_ref_in_pytrees",
                                  "closed_over_and_passed", "freeze_argument", "sin_of_ref", "sum_of_ref",
                                  "add_ref", "advanced_indexing"])
def test_ref_misuse_errors_match_jax(libs, name):
    def case(jax):
        try:
            return _ref_misuse(jax, name)
        except Exception as e:  # noqa: BLE001 - the whole text is compared (it names this file)
            return f"{type(e).__name__}: {e}"

    ours, theirs = (case(lib) for lib in libs)
    if isinstance(theirs, str):
        assert ours == theirs
    else:
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
