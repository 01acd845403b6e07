"""`lax.custom_root` and `lax.custom_linear_solve`: a solver run as given, differentiated
implicitly (through the equation the solution satisfies) rather than through its iterations.

Both are custom_vjps over the values the problem function closes over (found by
`closure_convert`) and the right-hand side. For a root x* of f(x, θ) = 0, the cotangent of θ
is -(∂f/∂θ)ᵀ λ with λ solving (∂f/∂x)ᵀ λ = x*'s cotangent (`tangent_solve` applied to the
transposed linearisation). For x = A⁻¹ b with A = matvec(θ): b's cotangent is λ = A⁻ᵀ x̄
(`transpose_solve`, or `solve` when `symmetric`) and θ's is -(∂(A x)/∂θ)ᵀ λ."""
from __future__ import annotations

from typing import Callable

from meshsim._src import tree_util

__all__ = ["custom_root", "custom_linear_solve"]


def _negate(tree):
    return tree_util.tree_map(lambda v: -v, tree)


def _zeros_like(tree):
    from meshsim._src.numpy import namespace as jnp
    return tree_util.tree_map(jnp.zeros_like, tree)


def _transposed(linear: Callable, at) -> Callable:
    """The transpose of the linear function `linear` (a function of values shaped like `at`)."""
    from meshsim._src.ad import vjp
    _, pullback = vjp(linear, at)
    return lambda ct: pullback(ct)[0]


def _theta_cotangent(fun: Callable, x, consts: list, ct) -> tuple:
    """(∂fun(x, *consts)/∂consts)ᵀ ct."""
    from meshsim._src.ad import vjp
    if not consts:
        return ()
    _, pullback = vjp(lambda *cs: fun(x, *cs), *consts)
    return tuple(pullback(ct))


def _implicitly_differentiated(problem: Callable, operand, run: Callable, cotangents: Callable,
                               reverse_refusal: str = ""):
    """`run(problem, operand)` as a custom_vjp over the values `problem` closes over and
    `operand`; `cotangents(problem_of, consts, result, operand, ct)` gives theirs, where
    `problem_of(x, *consts)` is `problem` with those values as arguments. With
    `reverse_refusal`, reverse mode raises TypeError(reverse_refusal); forward mode works."""
    from meshsim._src.ad import custom_vjp
    from meshsim._src.custom_gradient import closure_convert
    problem_of, consts = closure_convert(problem, operand)

    @custom_vjp
    def call(consts, operand):
        return run(lambda x: problem_of(x, *consts), operand)

    def call_fwd(consts, operand):
        out = call(consts, operand)
        return out, (consts, out, operand)

    def call_bwd(res, ct):
        return cotangents(problem_of, *res, ct)

    call.defvjp(call_fwd, call_bwd)
    call._forward_mode = True  # JAX differentiates custom_root/custom_linear_solve both ways
    call._reverse_refusal = reverse_refusal
    return call(tuple(consts), operand)


def custom_root(f: Callable, initial_guess, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False):
    """`solve(f, initial_guess)`: a root x of `f` (with `has_aux`, solve returns (x, aux));
    its derivative comes from f(x) = 0, `tangent_solve(g, y)` solving the linear g(z) = y."""
    def cotangents(f_of, consts, out, guess, ct):
        x, x_ct = (out[0], ct[0]) if has_aux else (out, ct)
        lam = tangent_solve(_transposed(lambda y: f_of(y, *consts), x), x_ct)
        return _theta_cotangent(f_of, x, consts, _negate(lam)), _zeros_like(guess)
    return _implicitly_differentiated(f, initial_guess, solve, cotangents)


_NO_TRANSPOSE_SOLVE = ("transpose_solve required for backwards mode automatic differentiation of "
                       "custom_linear_solve")


def custom_linear_solve(matvec: Callable, b, solve: Callable, transpose_solve: Callable | None = None,
                        symmetric: bool = False, has_aux: bool = False):
    """`solve(matvec, b)`: the x with matvec(x) = b (with `has_aux`, solve returns (x, aux)),
    differentiated as A⁻¹ b: `transpose_solve(vecmat, x̄)` (or `solve` when `symmetric`) gives
    b's cotangent, and `solve` the tangent of x (so forward mode needs no `transpose_solve`)."""
    def solution(fun, operator, rhs):
        out = fun(operator, rhs)
        return out[0] if has_aux else out

    def cotangents(matvec_of, consts, out, b, ct):
        from meshsim._src.custom_gradient import bind_linear_call
        x, x_ct = (out[0], ct[0]) if has_aux else (out, ct)

        def matvec_at(res):
            return lambda y: matvec_of(y, *res[0])

        def inverse(res, rhs):  # A⁻¹ rhs: the transpose of A⁻ᵀ, the tangent of x
            return solution(solve, matvec_at(res), rhs)

        def inverse_transpose(res, rhs):  # A⁻ᵀ rhs: the cotangent of b
            if symmetric:
                return inverse(res, rhs)
            return solution(transpose_solve, _transposed(matvec_at(res), res[1]), rhs)

        known = symmetric or transpose_solve is not None
        lam = bind_linear_call(inverse_transpose if known else None, inverse, (tuple(consts), x), x_ct,
                               refusal=_NO_TRANSPOSE_SOLVE)
        return _theta_cotangent(matvec_of, x, consts, _negate(lam)), lam
    refusal = "" if symmetric or transpose_solve is not None else _NO_TRANSPOSE_SOLVE
    return _implicitly_differentiated(matvec, b, solve, cotangents, reverse_refusal=refusal)
