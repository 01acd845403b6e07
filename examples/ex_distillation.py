"""The seed notebook's knowledge distillation on two meshes: the 8 devices are
split into `mesh_inference` (devices 0-3, axis "tp"), where the teacher (the
training example's MLP, layer sizes (32, 128, 256, 128, 4)) runs its
tensor-parallel forward pass with `psum_scatter`, and `mesh_train` (devices
4-7, axis "dp"), where the student (one layer, (32, 4)) takes data-parallel
SGD steps on the squared distance to the teacher's logits, its old weights
donated to the step. The teacher's logits move between the meshes with
`device_put`.

Written once against a module `jax` (meshsim or JAX), reusing
examples/ex_training.py's Model and Linear. `distill` is the notebook's loop
(it reads each loss, so the meshes take turns); `pipelined` dispatches the
teacher's next forward pass before the student's step, so with asynchronous
dispatch both meshes work at once. `run()` checks the losses and the student's
weights against an independent NumPy implementation for examples/run_all.py."""
from __future__ import annotations

from functools import partial

import numpy as np

import ex_training

TEACHER_SIZES = ex_training.LAYER_SIZES
STUDENT_SIZES = (32, 4)
BATCH = 16
STEPS = 5
LEARNING_RATE = 0.01


def build(jax, batch_size: int = BATCH, student_sizes: tuple = STUDENT_SIZES):
    jnp = jax.numpy
    Mesh, P, NamedSharding = jax.sharding.Mesh, jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    training = ex_training.build(jax)
    Model, Linear = training["Model"], training["Linear"]

    devices = jax.devices()
    split_idx = len(devices) // 2
    mesh_inference = Mesh(devices[:split_idx], axis_names=("tp",))
    mesh_train = Mesh(devices[split_idx:], axis_names=("dp",))

    with jax.set_mesh(mesh_inference):
        key_model_teacher, key_batch = jax.random.split(jax.random.key(0), num=2)
        model_teacher = Model(layer_sizes=TEACHER_SIZES, key=key_model_teacher)
        batch = model_teacher.init_random_batch(key=key_batch, batch_size=batch_size)
    with jax.set_mesh(mesh_train):
        model_student = Model(layer_sizes=student_sizes, key=jax.random.key(1))
    # JAX creates these replicated over the context mesh; meshsim on device 0:
    # placing them makes each model live on its own mesh in both.
    model_teacher = jax.device_put(model_teacher, NamedSharding(mesh_inference, P()))
    model_student = jax.device_put(model_student, NamedSharding(mesh_train, P()))

    # Teacher: tensor-parallel forward pass on mesh_inference.
    linear_pspec = Linear(w=P("tp", None), b=P("tp"))
    model_teacher_pspec = Model(layer_sizes=model_teacher.layer_sizes,
                                layers=[linear_pspec] * model_teacher.num_layers)

    @jax.jit
    @jax.shard_map(mesh=mesh_inference, in_specs=(model_teacher_pspec, P(None, "tp")),
                   out_specs=P(None, "tp"))
    def teacher_forward(model_sharded, x):
        def linear_tp(x, layer):
            matmul_local = x @ layer.w
            matmul_reduce_scattered = jax.lax.psum_scatter(matmul_local, "tp", scatter_dimension=1,
                                                           tiled=True)
            return matmul_reduce_scattered + layer.b
        return model_sharded.predict(x, linear_fwd_fn=linear_tp)

    # Student: data-parallel training step on mesh_train.
    linear_pspec = Linear(w=P(), b=P())
    model_student_pspec = Model(layer_sizes=model_student.layer_sizes,
                                layers=[linear_pspec] * model_student.num_layers)

    def linear(x, layer):
        return x @ layer.w + layer.b

    @jax.value_and_grad
    def kd_loss_dp(model_student, x, y_pred_teacher):
        y_pred_student = model_student.predict(x, linear_fwd_fn=linear)
        loss_dp_local = jnp.sum((y_pred_student - y_pred_teacher) ** 2, axis=-1).mean()
        return jax.lax.pmean(loss_dp_local, axis_name="dp")

    @partial(jax.jit, donate_argnames=["model_student"])
    @jax.shard_map(mesh=mesh_train, in_specs=(model_student_pspec, P("dp", None), P("dp", None)),
                   out_specs=(model_student_pspec, P()))
    def train_student_step(model_student, x, target_logits):
        loss, grads = kd_loss_dp(model_student, x, target_logits)
        model_student_updated = jax.tree.map(lambda w, w_grad: w - LEARNING_RATE * w_grad,
                                             model_student, grads)
        return model_student_updated, loss

    return dict(jax=jax, mesh_inference=mesh_inference, mesh_train=mesh_train,
                model_teacher=model_teacher, model_student=model_student, batch=batch,
                teacher_forward=teacher_forward, train_student_step=train_student_step,
                to_train=lambda x: jax.device_put(x, NamedSharding(mesh_train, P("dp", None))))


def fresh_student(env):
    """A copy of the initial student: each step donates (deletes) the model it is given."""
    jax = env["jax"]
    replicated = jax.sharding.NamedSharding(env["mesh_train"], jax.sharding.PartitionSpec())
    return jax.device_put(jax.tree.map(lambda x: x.copy(), env["model_student"]), replicated)


def distill(env, steps: int = STEPS, print_losses: bool = False):
    """The notebook's loop. Returns (losses, student model, teacher logits on mesh_train)."""
    jax = env["jax"]
    model_student, batch = fresh_student(env), env["batch"]
    losses = []
    for _ in range(steps):
        with jax.set_mesh(env["mesh_inference"]):
            y_pred_teacher = env["teacher_forward"](env["model_teacher"], batch.inputs)
        with jax.set_mesh(env["mesh_train"]):
            y_pred_teacher = env["to_train"](y_pred_teacher)
            batch_inputs = env["to_train"](batch.inputs)
            model_student, loss = env["train_student_step"](model_student, batch_inputs,
                                                            y_pred_teacher)
        if print_losses:
            print(f"Loss: {loss:.2f}")
        losses.append(loss)
    return losses, model_student, y_pred_teacher


def pipelined(env, steps: int = STEPS):
    """The same steps, the teacher's forward pass for step i + 1 dispatched
    before the student's step i: nothing is read until the end, so the two
    meshes run at the same time. Returns (losses, student model)."""
    jax = env["jax"]
    model_student, batch = fresh_student(env), env["batch"]
    teacher = partial(env["teacher_forward"], env["model_teacher"])
    batch_inputs = env["to_train"](batch.inputs)
    y_next = teacher(batch.inputs)
    losses = []
    for i in range(steps):
        y_pred_teacher = env["to_train"](y_next)
        if i + 1 < steps:
            y_next = teacher(batch.inputs)  # on mesh_inference, while the student trains
        model_student, loss = env["train_student_step"](model_student, batch_inputs, y_pred_teacher)
        losses.append(loss)
    return jax.block_until_ready((losses, model_student))


def as_numpy(model):
    return [(np.asarray(l.w, np.float64), np.asarray(l.b, np.float64)) for l in model.layers]


def numpy_forward(layers, x):
    for w, b in layers:
        x = np.maximum(x @ w + b, 0.0)
    return x


def numpy_distillation(teacher, student, x, steps: int = STEPS, lr: float = LEARNING_RATE):
    """Teacher forward pass and student SGD in float64 NumPy: (losses, student layers)."""
    y_teacher = numpy_forward(teacher, x)
    losses = []
    for _ in range(steps):
        loss, grads = ex_training.numpy_loss_and_grads(student, x, y_teacher)
        losses.append(loss)
        student = [(w - lr * dw, b - lr * db) for (w, b), (dw, db) in zip(student, grads)]
    return losses, student


def run():
    """The notebook's and the pipelined losses and final student weights against NumPy."""
    import meshsim

    env = build(meshsim)
    teacher, student = as_numpy(env["model_teacher"]), as_numpy(env["model_student"])
    x = np.asarray(env["batch"].inputs, np.float64)
    losses, final = numpy_distillation(teacher, student, x)
    checks = []
    for name, (ours, model) in {"notebook loop": distill(env)[:2], "pipelined": pipelined(env)}.items():
        checks += [(f"{name} loss {i}", l, r) for i, (l, r) in enumerate(zip(ours, losses))]
        for i, (layer, (w, b)) in enumerate(zip(model.layers, final)):
            checks += [(f"{name} student w{i}", layer.w, w), (f"{name} student b{i}", layer.b, b)]
    return checks
