"""jaxtyping's shape-and-dtype annotations checked at run time (beartype),
eagerly and under jit. Prints what it sees; must print the same under JAX and
under `python -m meshsim`."""
import jax
import jax.numpy as jnp
from beartype import beartype
from jaxtyping import Array, Float, Int, PyTree, jaxtyped


@jaxtyped(typechecker=beartype)
def project(x: Float[Array, "batch n"], w: Float[Array, "n k"]) -> Float[Array, "batch k"]:
    return x @ w


@jaxtyped(typechecker=beartype)
def total(tree: PyTree[Float[Array, "..."]]) -> Float[Array, ""]:
    return sum(jnp.sum(leaf) for leaf in jax.tree.leaves(tree))


print(project(jnp.ones((2, 3)), jnp.ones((3, 4))).shape)
print(jax.jit(project)(jnp.ones((5, 3)), jnp.ones((3, 1))).shape)
print(float(total({"a": jnp.ones(3), "b": [jnp.ones((2, 2))]})))
for bad in [(jnp.ones((2, 3)), jnp.ones((4, 4))), (jnp.ones((2, 3), jnp.int32), jnp.ones((3, 4)))]:
    try:
        project(*bad)
    except Exception as e:  # noqa: BLE001
        print(type(e).__name__, str(e).splitlines()[0])
print(isinstance(jnp.ones((2, 3)), Float[Array, "2 3"]),
      isinstance(jnp.ones((2, 3), jnp.int32), Float[Array, "2 3"]),
      isinstance(jnp.arange(3), Int[Array, "3"]), isinstance(jnp.arange(3), Int[Array, "4"]))
