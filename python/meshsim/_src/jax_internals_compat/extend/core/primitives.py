"""`jax.extend.core.primitives`: JAX's primitive objects, the very ones the equations of
make_jaxpr's programs hold (`eqn.primitive is primitives.jit_p`)."""
from meshsim._src.primitive_handles import handle, lax_handles

globals().update(lax_handles())

# The primitives of programs that jax.lax does not export, under JAX's names.
add_jaxvals_p = handle("add_any")
jit_p = handle("jit")
remat_p = handle("remat2")
custom_jvp_call_p = handle("custom_jvp_call")
custom_vjp_call_p = handle("custom_vjp_call")
name_p = handle("name")
cholesky_p = handle("cholesky")
eig_p = handle("eig")
eigh_p = handle("eigh")
hessenberg_p = handle("hessenberg")
householder_product_p = handle("householder_product")
lu_p = handle("lu")
qr_p = handle("qr")
schur_p = handle("schur")
svd_p = handle("svd")
triangular_solve_p = handle("triangular_solve")
random_bits_p = handle("random_bits")
threefry2x32_p = handle("threefry2x32")
# JAX's, with no meshsim primitive of their own (bind raises NotImplementedError).
call_p = handle("call")
closed_call_p = handle("closed_call")
custom_lin_p = handle("custom_lin")
empty2_p = handle("empty2")
get_p = handle("get")
swap_p = handle("swap")
random_fold_in_p = handle("random_fold_in")
random_gamma_p = handle("random_gamma")
random_seed_p = handle("random_seed")
random_split_p = handle("random_split")
tridiagonal_p = handle("tridiagonal")
tridiagonal_solve_p = handle("tridiagonal_solve")
