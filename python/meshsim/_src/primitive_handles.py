"""The primitive objects JAX exports as `jax.lax.*_p`: one object per primitive name, shared by
`jax.lax` and the equations of `make_jaxpr`'s programs, so that `eqn.primitive is lax.sin_p`.

Each object carries JAX's name and `multiple_results`; its `bind(*args, **params)` takes JAX's
parameter names and applies meshsim's primitive of that name (or, where meshsim composes the
operation from others, the lax function computing it). Applied to tracers it records what the
function would, so bind works eagerly and under jit, grad and vmap alike. A JAX primitive
meshsim has no counterpart for raises NotImplementedError naming it."""
from __future__ import annotations

import enum
from typing import Callable

from meshsim._src import core
from meshsim._src.jax_internals_compat.user_primitives import Primitive

# The attribute names of `jax.lax`'s handles whose primitive is named as the attribute without `_p`.
_SAME_NAMED = """
abs acos acosh add after_all all_gather all_to_all and approx_top_k argmax argmin asin asinh atan2
atan atanh axis_index bessel_i0e bessel_i1e bitcast_convert_type broadcast_in_dim cbrt ceil clamp
clz complex concatenate cond conj conv_general_dilated convert_element_type copy cos cosh
create_token cumlogsumexp cummax cummin cumprod cumsum dce_sink device_put digamma div dot_general
dynamic_slice dynamic_update_slice eq eq_to erf_inv erf erfc exp2 exp expm1 fft floor gather ge gt
igamma_grad_a igamma igammac imag integer_pow iota is_finite le le_to lgamma log1p log logistic lt
lt_to max min mul mulhi ne neg nextafter not optimization_barrier or pad pmax pmin polygamma
population_count pow ppermute psum ragged_all_to_all real reduce_and reduce_max reduce_min
reduce_or reduce reduce_precision reduce_prod reduce_sum reduce_window_max reduce_window_min
reduce_window reduce_window_sum reduce_xor regularized_incomplete_beta rem reshape rev
rng_bit_generator rng_uniform round rsqrt scan scatter select_and_gather_add
select_and_scatter_add select_and_scatter select_n sharding_constraint shift_left
shift_right_arithmetic shift_right_logical sign sin sinh slice sort split sqrt square squeeze stack
stage stop_gradient sub tan tanh tile top_k transpose unstack while xor zeta
""".split()

# `jax.lax` handles named otherwise: attribute -> JAX's primitive name.
_RENAMED = {"linear_solve_p": "custom_linear_solve", "scatter_add_p": "scatter-add",
            "scatter_sub_p": "scatter-sub", "scatter_mul_p": "scatter-mul",
            "scatter_min_p": "scatter-min", "scatter_max_p": "scatter-max"}

# JAX's primitives returning a list of results.
_MULTIPLE_RESULTS = {"approx_top_k", "cond", "dce_sink", "device_put", "custom_linear_solve",
                     "optimization_barrier", "reduce", "reduce_window", "rng_bit_generator", "scan",
                     "sort", "split", "top_k", "unstack", "while",
                     # primitives of programs that jax.lax does not export
                     "jit", "shard_map", "custom_jvp_call", "custom_vjp_call", "remat2", "eigh",
                     "eig", "lu", "qr", "svd", "schur", "hessenberg", "pure_callback",
                     "io_callback", "debug_callback", "threefry2x32", "tridiagonal", "call",
                     "closed_call", "custom_lin"}

# meshsim's primitive names JAX spells differently.
_JAX_NAME = {"scatter_add": "scatter-add", "scatter_sub": "scatter-sub",
             "scatter_mul": "scatter-mul", "scatter_min": "scatter-min",
             "scatter_max": "scatter-max"}
_MESHSIM_NAME = {v: k for k, v in _JAX_NAME.items()}

# Parameters JAX's equations carry that meshsim's leave out, with the value JAX records when
# the program does not choose one (meshsim then has no other choice either).
_UNARY_ACCURACY = ("sin", "cos", "tan", "exp", "exp2", "log", "log1p", "expm1", "tanh",
                   "logistic", "sqrt", "rsqrt", "cbrt")
JAX_DEFAULT_PARAMS: dict[str, dict] = {
    **{name: {"accuracy": None} for name in _UNARY_ACCURACY},
    "reduce_sum": {"out_sharding": None},
    "dot_general": {"out_sharding": None},
    "iota": {"sharding": None},
    "reshape": {"dimensions": None, "sharding": None},
    "convert_element_type": {"sharding": None},
    "broadcast_in_dim": {"sharding": None},
}


def _lax():
    from meshsim._src.lax import namespace
    return namespace


def _operand(x):
    return x if core.is_value(x) else core.asarray_value(x)


def _plain(value):
    """A parameter as meshsim's primitives read it: enums as their numbers, tuples as lists of
    numbers where JAX nests them (the programs' own values pass unchanged)."""
    if isinstance(value, enum.Enum):
        return int(value.value)
    program = getattr(value, "program", None)
    if program is not None:
        return program
    if isinstance(value, (tuple, list)) and any(getattr(v, "program", None) is not None for v in value):
        return tuple(_plain(v) for v in value)
    return value


def _apply_dot_general(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None,
                       out_sharding=None):
    return _lax().dot_general(lhs, rhs, dimension_numbers, precision=precision,
                              preferred_element_type=preferred_element_type, out_sharding=out_sharding)


def _scatter_applier(lax_name: str) -> Callable:
    def apply(operand, indices, updates, *, dimension_numbers, indices_are_sorted=False,
              unique_indices=False, mode=None, update_jaxpr=None, update_consts=()):
        return getattr(_lax(), lax_name)(operand, indices, updates, dimension_numbers,
                                         indices_are_sorted=indices_are_sorted,
                                         unique_indices=unique_indices, mode=mode)
    return apply


def _apply_gather(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted=False,
                  unique_indices=False, mode=None, fill_value=None):
    return _lax().gather(operand, indices, dimension_numbers, slice_sizes,
                         indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                         mode=mode, fill_value=fill_value)


def _apply_conv(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                feature_group_count=1, batch_group_count=1, precision=None,
                preferred_element_type=None, out_sharding=None):
    return _lax().conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                       dimension_numbers, feature_group_count, batch_group_count,
                                       precision=precision, preferred_element_type=preferred_element_type)


def _apply_approx_top_k(operand, *, k, reduction_dimension=-1, recall_target=0.95, is_max_k=True,
                        reduction_input_size_override=-1, aggregate_to_topk=True):
    fun = _lax().approx_max_k if is_max_k else _lax().approx_min_k
    return fun(operand, k, reduction_dimension=reduction_dimension, recall_target=recall_target,
               reduction_input_size_override=reduction_input_size_override,
               aggregate_to_topk=aggregate_to_topk)


def _by_lax_function(lax_name: str, param_order: tuple[str, ...] = ()) -> Callable:
    """Applies `lax.<lax_name>(*args, *params in param_order)` (for a primitive meshsim composes)."""
    def apply(*args, accuracy=None, **params):
        return getattr(_lax(), lax_name)(*args, *(params[p] for p in param_order))
    return apply


# JAX primitives applied by a lax function instead of a primitive of the same parameters.
_APPLIERS: dict[str, Callable] = {
    "dot_general": _apply_dot_general,
    "gather": _apply_gather,
    "conv_general_dilated": _apply_conv,
    "scatter": _scatter_applier("scatter"),
    **{f"scatter-{c}": _scatter_applier(f"scatter_{c}") for c in ("add", "sub", "mul", "min", "max")},
    "approx_top_k": _apply_approx_top_k,
    "regularized_incomplete_beta": _by_lax_function("betainc"),
    "mulhi": _by_lax_function("mulhi"),
    "cumlogsumexp": _by_lax_function("cumlogsumexp", ("axis", "reverse")),
    "reduce_precision": _by_lax_function("reduce_precision", ("exponent_bits", "mantissa_bits")),
    "split": _by_lax_function("split", ("sizes", "axis")),
    "tile": _by_lax_function("tile", ("reps",)),
}


def _apply_recorded(name: str, thunk, *args):
    """Records a custom_vjp_call or custom_jvp_call equation again from the params
    make_jaxpr's view gave it (its thunk or rule function keeps the recorded programs); JAX's
    own thunks and functions are not programs."""
    recorded = getattr(thunk, "recorded", None)
    if recorded is None:
        how = "jax.custom_vjp" if name == "custom_vjp_call" else "jax.custom_jvp"
        raise NotImplementedError(f"meshsim binds '{name}' only with the params of an "
                                  f"equation of make_jaxpr; apply {how} instead")
    return core.bind(name, *args, **recorded)


def _apply_custom_vjp_call(*args, fwd_jaxpr_thunk=None, **params):
    return _apply_recorded("custom_vjp_call", fwd_jaxpr_thunk, *args)


def _apply_custom_jvp_call(*args, jvp_jaxpr_fun=None, **params):
    return _apply_recorded("custom_jvp_call", jvp_jaxpr_fun, *args)


_APPLIERS["custom_jvp_call"] = _apply_custom_jvp_call
_APPLIERS["custom_vjp_call"] = _apply_custom_vjp_call


def _apply_jit(*args, jaxpr, name, ctx_mesh=None, **defaults):
    """Records a nested jit again from JAX's params: meshsim's call holds its program, name and
    context mesh (as text); the shardings, layouts and options JAX records are the defaults."""
    params = {"jaxpr": getattr(jaxpr, "program", jaxpr), "name": name}
    if ctx_mesh is not None and not getattr(ctx_mesh, "empty", False):
        params["ctx_mesh"] = ctx_mesh if isinstance(ctx_mesh, str) else str(ctx_mesh)
    return core.bind("jit", *args, **params)


_APPLIERS["jit"] = _apply_jit

class LaxPrimitive(Primitive):
    """One of JAX's primitives as meshsim applies it (see the module's docstring)."""

    def __init__(self, name: str, multiple_results: bool):
        super().__init__(name)
        self.multiple_results = multiple_results

    def bind(self, *args, **params):
        applier = _APPLIERS.get(self.name)
        # meshsim's own form of a gather or scatter (by axes, without dimension numbers) binds
        # as recorded.
        own_indexing_form = self.name.startswith(("gather", "scatter")) and "dimension_numbers" not in params
        if applier is not None and not own_indexing_form:
            out = applier(*(_operand(a) for a in args), **params)
            return list(out) if self.multiple_results else out
        meshsim_name = _MESHSIM_NAME.get(self.name, self.name)
        if meshsim_name not in _core_names():
            raise NotImplementedError(
                f"meshsim has no implementation of the primitive '{self.name}' to bind")
        # The core refuses a wrong operand count (a TypeError naming the primitive and the
        # counts, from the count each primitive declares where it is registered).
        plain = {k: _plain(v) for k, v in params.items()}
        outs = core.bind(meshsim_name, *(_operand(a) for a in args), **plain)
        return list(outs) if self.multiple_results else outs[0]


_registered: set | None = None


def _core_names() -> set:
    global _registered
    if _registered is None:
        from meshsim import _core
        _registered = set(_core.primitive_names())
    return _registered


_by_name: dict[str, LaxPrimitive] = {}


def handle(jax_name: str) -> LaxPrimitive:
    """The one object standing for the primitive JAX names `jax_name`."""
    p = _by_name.get(jax_name)
    if p is None:
        p = _by_name[jax_name] = LaxPrimitive(jax_name, jax_name in _MULTIPLE_RESULTS)
    return p


def handle_of_equation(meshsim_name: str) -> LaxPrimitive:
    """The object for an equation of meshsim's primitive `meshsim_name`."""
    return handle(_JAX_NAME.get(meshsim_name, meshsim_name))


def lax_handles() -> dict[str, LaxPrimitive]:
    """`jax.lax`'s `*_p` attributes, by attribute name."""
    out = {f"{name}_p": handle(name) for name in _SAME_NAMED}
    out.update({attr: handle(name) for attr, name in _RENAMED.items()})
    return out


def jax_params(meshsim_name: str, params: dict) -> dict:
    """An equation's parameters as JAX's equations hold them (sub-programs aside): JAX's nested
    dimension numbers and tuples, and the parameters JAX records whose values meshsim fixes."""
    out = {}
    for key, value in params.items():
        if key == "dimension_numbers" and isinstance(value, list):
            value = _jax_dimension_numbers(meshsim_name, value)
        elif key == "mode" and isinstance(value, str) and "dimension_numbers" in params:
            value = _jax_mode(value)
        elif isinstance(value, list):
            value = _tuples(value)
        out[key] = value
    for key, value in JAX_DEFAULT_PARAMS.get(meshsim_name, {}).items():
        out.setdefault(key, value)
    return out


def _jax_dimension_numbers(meshsim_name: str, parts: list):
    """meshsim's dimension numbers (lists in the order of JAX's fields) as JAX's types."""
    lax, fields = _lax(), tuple(tuple(part) for part in parts)
    if meshsim_name == "dot_general":
        lc, rc, lb, rb = fields
        return (lc, rc), (lb, rb)
    if meshsim_name == "gather":
        return lax.GatherDimensionNumbers(*fields)
    if meshsim_name.startswith("scatter"):
        return lax.ScatterDimensionNumbers(*fields)
    if meshsim_name == "conv_general_dilated":
        return lax.ConvDimensionNumbers(*fields)
    return fields


def _jax_mode(mode: str):
    """A gather or scatter's recorded mode ('fill_or_drop', 'fill', 'clip', ...) as JAX's enum."""
    modes = _lax().GatherScatterMode
    return modes[mode.upper()] if mode.upper() in modes.__members__ else modes.from_any(mode)


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value
