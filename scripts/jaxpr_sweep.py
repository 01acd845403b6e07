"""Prints which of a broad set of functions make_jaxpr prints exactly as JAX 0.10.2 does
(jax.numpy, jax.nn, jax.lax, nested jits, and grad/vmap of some), and the count.

    PYTHONPATH=python python3 scripts/jaxpr_sweep.py [-v]   # -v: show each difference

JAX is the oracle here, never a dependency of meshsim."""
import sys

import numpy as np

import meshsim

X = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
V = np.linspace(-1, 1, 8, dtype=np.float32)
SQ = np.eye(4, dtype=np.float32) + 0.1
I = np.array([1, 3], np.int32)
N = np.arange(8, dtype=np.int32)
B = X > 0


def cases(J):
    jnp, lax, nn = J.numpy, J.lax, J.nn
    unary = ["abs", "exp", "log1p", "sqrt", "tanh", "sin", "floor", "ceil", "round", "rint", "trunc",
             "sign", "square", "reciprocal", "negative", "positive", "isnan", "isinf", "isfinite",
             "signbit", "arccosh", "sinc", "deg2rad", "exp2", "log2", "log10", "cbrt", "fabs",
             "nan_to_num", "angle", "real", "imag", "conj", "logical_not", "i0", "spacing"]
    binary = ["add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "remainder",
              "fmod", "power", "maximum", "minimum", "fmax", "fmin", "hypot", "arctan2", "copysign",
              "heaviside", "logaddexp", "greater", "less_equal", "equal", "not_equal", "nextafter",
              "logical_and", "isclose"]
    reductions = ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "all", "any",
                  "median", "ptp", "count_nonzero", "nansum", "nanmean", "nanmax", "cumsum", "cumprod",
                  "nancumsum", "logsumexp_placeholder"]
    nn_fns = ["relu", "relu6", "silu", "swish", "gelu", "sigmoid", "softplus", "soft_sign", "elu",
              "selu", "celu", "leaky_relu", "log_sigmoid", "hard_tanh", "hard_sigmoid", "hard_silu",
              "mish", "squareplus", "sparse_plus", "softmax", "log_softmax", "standardize",
              "logsumexp"]
    c = {}
    for n in unary:
        if hasattr(jnp, n):
            c[f"jnp.{n}"] = (getattr(jnp, n), (X,))
    for n in binary:
        c[f"jnp.{n}"] = (getattr(jnp, n), (X, X[::-1]))
    for n in reductions:
        if hasattr(jnp, n):
            c[f"jnp.{n}"] = (getattr(jnp, n), (X,))
            if n not in ("median", "cumsum", "cumprod", "nancumsum"):
                c[f"jnp.{n}(axis=1)"] = (lambda a, f=getattr(jnp, n): f(a, axis=1), (X,))
    for n in nn_fns:
        f = getattr(nn, n)
        c[f"nn.{n}"] = (f, (X,))
    c.update({
        "where": (lambda a: jnp.where(a > 0, a, 0.0), (X,)),
        "where_scalar_both": (lambda a: jnp.where(a > 0, 1.0, -1.0), (X,)),
        "where_arrays": (lambda a, b: jnp.where(a > b, a, b), (X, X[::-1])),
        "take": (lambda a, i: jnp.take(a, i, axis=1), (X, I)),
        "take_flat": (lambda a, i: jnp.take(a, i), (X, I)),
        "take_along_axis": (lambda a: jnp.take_along_axis(a, jnp.argsort(a, axis=1), axis=1), (X,)),
        "clip": (lambda a: jnp.clip(a, -1.0, 1.0), (X,)),
        "clip_min": (lambda a: jnp.clip(a, min=0.0), (X,)),
        "tril": (jnp.tril, (SQ,)),
        "triu": (lambda a: jnp.triu(a, 1), (SQ,)),
        "trace": (jnp.trace, (SQ,)),
        "diagonal": (jnp.diagonal, (SQ,)),
        "diag": (jnp.diag, (SQ,)),
        "sort": (lambda a: jnp.sort(a, axis=1), (X,)),
        "argsort": (lambda a: jnp.argsort(a, axis=1), (X,)),
        "flip": (lambda a: jnp.flip(a, 1), (X,)),
        "roll": (lambda a: jnp.roll(a, 2, axis=1), (X,)),
        "rot90": (jnp.rot90, (SQ,)),
        "pad": (lambda a: jnp.pad(a, 1), (X,)),
        "pad_edge": (lambda a: jnp.pad(a, ((1, 0), (0, 2)), mode="edge"), (X,)),
        "moveaxis": (lambda a: jnp.moveaxis(a, 0, 1), (X,)),
        "swapaxes": (lambda a: jnp.swapaxes(a, 0, 1), (X,)),
        "squeeze": (lambda a: jnp.squeeze(a[None]), (X,)),
        "expand_dims": (lambda a: jnp.expand_dims(a, 0), (X,)),
        "reshape": (lambda a: jnp.reshape(a, (8, 4)), (X,)),
        "ravel": (jnp.ravel, (X,)),
        "transpose": (jnp.transpose, (X,)),
        "concatenate": (lambda a: jnp.concatenate([a, a], 1), (X,)),
        "stack": (lambda a: jnp.stack([a, a]), (X,)),
        "split": (lambda a: jnp.split(a, 2, axis=1), (X,)),
        "tile": (lambda a: jnp.tile(a, (2, 1)), (X,)),
        "repeat": (lambda a: jnp.repeat(a, 2, axis=0), (X,)),
        "broadcast_to": (lambda v: jnp.broadcast_to(v, (4, 8)), (V,)),
        "atleast_2d": (jnp.atleast_2d, (V,)),
        "outer": (jnp.outer, (V, V)),
        "inner": (jnp.inner, (V, V)),
        "dot": (jnp.dot, (X, X.T)),
        "matmul": (jnp.matmul, (X, X.T)),
        "einsum": (lambda a, b: jnp.einsum("ij,kj->ik", a, b), (X, X)),
        "vdot": (jnp.vdot, (V, V)),
        "kron": (jnp.kron, (SQ[:2, :2], SQ[:2, :2])),
        "cross": (lambda a: jnp.cross(a[:, :3], a[:, 3:6]), (X,)),
        "diff": (jnp.diff, (X,)),
        "ediff1d": (jnp.ediff1d, (V,)),
        "append": (jnp.append, (V, V)),
        "allclose": (lambda a: jnp.allclose(a, a), (X,)),
        "searchsorted": (lambda v: jnp.searchsorted(v, v[::2]), (np.sort(V),)),
        "digitize": (lambda v: jnp.digitize(v, np.array([-0.5, 0, 0.5], np.float32)), (V,)),
        "linspace": (lambda a: jnp.linspace(0, 1, 5) + a[0, :5], (X,)),
        "arange": (lambda a: jnp.arange(8) + a[0].astype(np.int32), (X,)),
        "zeros_like": (jnp.zeros_like, (X,)),
        "ones": (lambda a: jnp.ones((4, 8)) + a, (X,)),
        "full_like": (lambda a: jnp.full_like(a, 2.0), (X,)),
        "eye": (lambda a: jnp.eye(4) @ a, (SQ,)),
        "identity": (lambda a: jnp.identity(4) + a, (SQ,)),
        "one_hot": (lambda n: nn.one_hot(n, 8), (N,)),
        "polyval": (lambda v: jnp.polyval(np.array([1.0, 2.0, 3.0], np.float32), v), (V,)),
        "bincount": (lambda n: jnp.bincount(n, length=8), (N,)),
        "unique_size": (lambda n: jnp.unique(n, size=8), (N,)),
        "cumsum_axis": (lambda a: jnp.cumsum(a, axis=1), (X,)),
        "average": (lambda a: jnp.average(a, axis=0), (X,)),
        "quantile": (lambda v: jnp.quantile(v, 0.5), (V,)),
        "percentile": (lambda v: jnp.percentile(v, 50.0), (V,)),
        "astype": (lambda a: a.astype(np.int32), (X,)),
        "x.T": (lambda a: a.T, (X,)),
        "x[0]": (lambda a: a[0], (X,)),
        "x[1:3]": (lambda a: a[1:3], (X,)),
        "x[:,::2]": (lambda a: a[:, ::2], (X,)),
        "x[idx]": (lambda a, i: a[i], (X, I)),
        "x[idx,1:3]": (lambda a, i: a[i, 1:3], (X, I)),
        "x[mask_like]": (lambda a: jnp.where(B, a, 0), (X,)),
        "x.at[idx].set": (lambda a, i: a.at[i].set(0.0), (X, I)),
        "x.at[idx].add": (lambda a, i: a.at[i].add(1.0), (X, I)),
        "x.at[0].set": (lambda a: a.at[0].set(1.0), (X,)),
        "x.sum()": (lambda a: a.sum(), (X,)),
        "x.mean(0)": (lambda a: a.mean(0), (X,)),
        "x.clip": (lambda a: a.clip(0.0, 1.0), (X,)),
        "x.round": (lambda a: a.round(), (X,)),
        "lax.dynamic_slice": (lambda a, i: lax.dynamic_slice(a, (i, 0), (2, 8)), (X, np.int32(1))),
        "lax.dynamic_update_slice": (lambda a: lax.dynamic_update_slice(a, a[:2], (1, 0)), (X,)),
        "lax.cond": (lambda a: lax.cond(a.sum() > 0, jnp.sin, jnp.cos, a), (X,)),
        "lax.scan": (lambda v: lax.scan(lambda c, x: (c + x, c * x), 0.0, v), (V,)),
        "lax.fori_loop": (lambda a: lax.fori_loop(0, 3, lambda i, c: c * 2.0, a), (X,)),
        "lax.while_loop": (lambda a: lax.while_loop(lambda c: c.sum() < 100.0, lambda c: c + 1.0, a), (X,)),
        "lax.top_k": (lambda v: lax.top_k(v, 3), (V,)),
        "lax.select": (lambda a: lax.select(a > 0, a, -a), (X,)),
        "lax.clamp": (lambda a: lax.clamp(-1.0, a, 1.0), (X,)),
        "lax.rsqrt": (lambda a: lax.rsqrt(jnp.abs(a) + 1.0), (X,)),
        "lax.reduce_precision": (lambda a: lax.reduce_precision(a, 5, 10), (X,)),
        "lax.erf": (lax.erf, (X,)),
        "lax.lgamma": (lambda a: lax.lgamma(jnp.abs(a) + 1.0), (X,)),
        "random.normal": (lambda k: J.random.normal(k, (4,)), (np.array([0, 1], np.uint32),)),
        "random.uniform": (lambda k: J.random.uniform(k, (4,)), (np.array([0, 1], np.uint32),)),
        "random.split": (lambda k: J.random.split(k), (np.array([0, 1], np.uint32),)),
        "linalg.norm": (jnp.linalg.norm, (X,)),
        "linalg.det": (jnp.linalg.det, (SQ,)),
        "linalg.inv": (jnp.linalg.inv, (SQ,)),
        "linalg.solve": (lambda a: jnp.linalg.solve(a, a[:, 0]), (SQ,)),
        "linalg.cholesky": (lambda a: jnp.linalg.cholesky(a @ a.T), (SQ,)),
        "nested_jit": (lambda a: J.jit(lambda b: b * 2.0 + 1.0)(a).sum(), (X,)),
        "nested_jit_closure": (lambda a, s: J.jit(lambda b: b * s)(a), (X, np.float32(2))),
        "nested_jit_static": (lambda a: J.jit(lambda b, k: b * k, static_argnums=1)(a, 3), (X,)),
        "nested_jit_pytree": (lambda a: J.jit(lambda b: {"u": b, "v": (b, 2 * b)})(a), (X,)),
        "jit_of_jit": (J.jit(lambda a: J.jit(jnp.sin)(a) + 1.0), (X,)),
        "nested_jit_inline": (lambda a: J.jit(lambda b: b * 2.0, inline=True)(a), (X,)),
        "vmap_nested_jit": (J.vmap(lambda v: J.jit(lambda b: b * 2.0)(v).sum()), (X,)),
        "vmap_where": (J.vmap(lambda v: jnp.where(v > 0, v, 0.0)), (X,)),
        "vmap_dynamic_slice": (J.vmap(lambda v, i: lax.dynamic_slice(v, (i,), (2,))), (X, N[:4])),
        "vmap_take": (J.vmap(lambda v, i: jnp.take(v, i)), (X, np.stack([I] * 4))),
        "grad_sum_sin": (J.grad(lambda a: jnp.sin(a).sum()), (X,)),
        "grad_where": (J.grad(lambda a: jnp.where(a > 0, a, 0.0).sum()), (X,)),
        "grad_relu": (J.grad(lambda a: nn.relu(a).sum()), (X,)),
        "grad_softmax": (J.grad(lambda a: nn.softmax(a)[0, 0]), (X,)),
        "grad_nested_jit": (J.grad(lambda a: J.jit(lambda b: b * b)(a).sum()), (X,)),
        "grad_take": (J.grad(lambda a: jnp.take(a, np.array([1, 2]), axis=1).sum()), (X,)),
    })
    c.pop("jnp.logsumexp_placeholder", None)
    return c


def main() -> None:
    import jax
    verbose = "-v" in sys.argv
    ours, theirs = cases(meshsim), cases(jax)
    exact, differ = [], []
    for name, (f, args) in theirs.items():
        try:
            want = str(jax.make_jaxpr(f)(*args))
        except Exception:  # noqa: BLE001 - not a case JAX prints
            continue
        g, _ = ours[name]
        try:
            got = str(meshsim.make_jaxpr(g)(*args))
        except Exception as e:  # noqa: BLE001 - reported as a difference
            got = f"{type(e).__name__}: {e}"
        (exact if got == want else differ).append(name)
        if verbose and got != want:
            print(f"--- {name}\nJAX:\n{want}\nmeshsim:\n{got}\n")
    print("differ:", " ".join(differ))
    print(f"{len(exact)} of {len(exact) + len(differ)} printed exactly")


if __name__ == "__main__":
    main()
