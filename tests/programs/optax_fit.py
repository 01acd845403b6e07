"""A linear-regression fit with optax, as a JAX user writes it: adam, then
adamw with a warmup-cosine schedule and global-norm clipping, inside a jitted
step. Prints the losses and the final parameters; run under real JAX and under
`python -m meshsim`, the printed values must agree."""
import jax
import jax.numpy as jnp
import numpy as np
import optax

rng = np.random.default_rng(0)
xs = jnp.asarray(rng.normal(size=(64, 3)).astype(np.float32))
true_w = jnp.array([1.5, -2.0, 0.5])
ys = xs @ true_w + 0.3


def loss_fn(params, x, y):
    pred = x @ params["w"] + params["b"]
    return jnp.mean(optax.l2_loss(pred, y))


def fit(optimizer, steps):
    params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
    opt_state = optimizer.init(params)

    @jax.jit
    def step(params, opt_state):
        loss, grads = jax.value_and_grad(loss_fn)(params, xs, ys)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    for i in range(steps):
        params, opt_state, loss = step(params, opt_state)
        if i % 25 == 0:
            print(f"step {i:3d} loss {float(loss):.6f}")
    return params


params = fit(optax.adam(learning_rate=0.1), 100)
print("adam w", np.round(np.asarray(params["w"]), 4), "b", round(float(params["b"]), 4))

schedule = optax.warmup_cosine_decay_schedule(init_value=0.0, peak_value=0.1, warmup_steps=10,
                                              decay_steps=100, end_value=0.001)
optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=1e-4))
params = fit(optimizer, 100)
print("adamw w", np.round(np.asarray(params["w"]), 4), "b", round(float(params["b"]), 4))
print("schedule", [round(float(schedule(i)), 5) for i in (0, 5, 10, 50, 100)])
print("type", type(params["w"]).__name__ in ("ArrayImpl", "Array"), params["w"].dtype)
