"""The seed notebook's Mixture-of-Experts layer ("MOE Parallel with Token
Dropping"): `calculate_offsets`, `calculate_drop_token_mask`, the
`MOERaggedDispatcher` pytree (sizes and offsets exchanged with `all_to_all`,
tokens moved with `ragged_all_to_all`) and `moe_layer` (jit(shard_map) over
("dp", "ep"): top-k routing, capacity dropping on the sender, dispatch,
`lax.ragged_dot` over the local experts, gating, the return trip and
`segment_sum`), written once against a module `jax` (meshsim or JAX), plus an
independent NumPy reference of the layer. tests/test_moe.py and
notebooks/expert_parallel_moe.ipynb use it; `run()` checks the layer against
NumPy for examples/run_all.py.

One change from the notebook: its `expert_capacity = jnp.ceil(...)` is a traced
value inside jit, which JAX (and meshsim) reject as a buffer size in
`jnp.zeros((capacity,) ...)`; the layer takes the ceiling in Python
(`build(jax, notebook_capacity=True)` keeps the notebook's line, to show the
error)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


def build(jax, notebook_capacity=False):
    jnp = jax.numpy
    P = jax.sharding.PartitionSpec

    def calculate_offsets(sizes):
        """Chunk start offsets from chunk sizes: [2, 3, 1] -> [0, 2, 5]."""
        sizes_i32 = jnp.asarray(sizes, dtype=jnp.int32)
        return jnp.cumsum(jnp.pad(sizes_i32[:-1], (1, 0)))

    def calculate_drop_token_mask(token_expert_ids, token_expert_probs, num_experts, expert_capacity):
        """True for the (token, expert) pairs ranked at or past `expert_capacity`
        within their expert (rank: probability descending, then position)."""
        index_to_sorted = jnp.lexsort((-token_expert_probs, token_expert_ids))
        token_expert_ids_sorted_by_rank = token_expert_ids[index_to_sorted]
        expert_load_size = jnp.bincount(token_expert_ids, length=num_experts)
        expert_start_offsets = calculate_offsets(expert_load_size)
        token_within_expert_rank = (jnp.arange(token_expert_ids_sorted_by_rank.shape[0])
                                    - expert_start_offsets[token_expert_ids_sorted_by_rank])
        is_dropped_sorted = token_within_expert_rank >= expert_capacity
        index_to_inverse_sorted = jnp.argsort(index_to_sorted)
        return is_dropped_sorted[index_to_inverse_sorted]

    @jax.tree_util.register_dataclass
    @dataclass(frozen=True, slots=True)
    class MOERaggedDispatcher:
        """The communication plan of one exchange: where each device reads, how much
        it sends to each peer, and where the peers write (forward and return trip)."""
        send_sizes: object
        input_offsets: object
        recv_sizes: object
        recv_offsets: object
        fwd_remote_output_offsets: object
        bwd_remote_output_offsets: object
        axis_name: object = field(default="ep", metadata={"static": True})

        @property
        def num_devices(self):
            return jax.lax.axis_size(self.axis_name)

        @classmethod
        def from_target_device_ids(cls, target_device_ids, *, axis_name, mask=None):
            num_devices = jax.lax.axis_size(axis_name)
            device_send_load = jnp.bincount(target_device_ids, length=num_devices)
            input_offsets = calculate_offsets(device_send_load)
            # Only send this much: masked-out items (sorted last per device) stay home.
            device_send_load_actual = jnp.bincount(
                target_device_ids,
                weights=mask.astype(target_device_ids.dtype) if mask is not None else None,
                length=num_devices)
            recv_sizes = jax.lax.all_to_all(device_send_load_actual, axis_name=axis_name,
                                            split_axis=0, concat_axis=0, tiled=True)
            recv_offsets = calculate_offsets(recv_sizes)
            fwd_remote_output_offsets = jax.lax.all_to_all(recv_offsets, axis_name=axis_name,
                                                           split_axis=0, concat_axis=0, tiled=True)
            bwd_remote_output_offsets = jax.lax.all_to_all(input_offsets, axis_name=axis_name,
                                                           split_axis=0, concat_axis=0, tiled=True)
            return cls(send_sizes=device_send_load_actual, input_offsets=input_offsets,
                       recv_sizes=recv_sizes, recv_offsets=recv_offsets,
                       fwd_remote_output_offsets=fwd_remote_output_offsets,
                       bwd_remote_output_offsets=bwd_remote_output_offsets, axis_name=axis_name)

        def dispatch_forward(self, data, capacity):
            output_buffer = jnp.zeros((capacity,) + data.shape[1:], dtype=data.dtype)
            received = jax.lax.ragged_all_to_all(
                data, output_buffer, self.input_offsets, self.send_sizes,
                self.fwd_remote_output_offsets, self.recv_sizes, axis_name=self.axis_name)
            is_valid = jnp.arange(capacity) < jnp.sum(self.recv_sizes)
            return received, is_valid

        def dispatch_backward(self, data, capacity):
            output_buffer = jnp.zeros((capacity,) + data.shape[1:], dtype=data.dtype)
            returned = jax.lax.ragged_all_to_all(
                data, output_buffer, self.recv_offsets, self.recv_sizes,
                self.bwd_remote_output_offsets, self.send_sizes, axis_name=self.axis_name)
            is_valid = jnp.arange(capacity) < jnp.sum(self.send_sizes)
            return returned, is_valid

    ceil = jnp.ceil if notebook_capacity else math.ceil

    def moe_layer(sequences, router_weights, expert_weights, *, mesh, top_k, expert_axis_name="ep",
                  capacity_factor=1.2):
        @jax.jit
        @jax.shard_map(mesh=mesh,
                       in_specs=(P("dp", expert_axis_name, None), P(None, None),
                                 P(expert_axis_name, None, None)),
                       out_specs=P("dp", expert_axis_name, None))
        def _sharded_moe_impl(x_shard, router_weights, local_expert_weights):
            num_devices_ep = jax.lax.axis_size(expert_axis_name)
            num_experts_per_device = local_expert_weights.shape[0]
            num_total_experts = router_weights.shape[-1]
            assert num_total_experts == num_devices_ep * num_experts_per_device

            # A. Routing: (b*s, hidden) -> top-k experts and their softmax weights.
            tokens = x_shard.reshape(-1, x_shard.shape[-1])
            expert_capacity = ceil(tokens.shape[0] * top_k * num_devices_ep / num_total_experts
                                   * capacity_factor)
            device_capacity = expert_capacity * num_experts_per_device
            top_k_logits, top_k_expert_ids = jax.lax.top_k(tokens @ router_weights, k=top_k)
            top_k_expert_probs = jax.nn.softmax(top_k_logits, axis=-1)
            expert_ids_flat = top_k_expert_ids.ravel()
            expert_probs_flat = top_k_expert_probs.ravel()
            tokens_flat = jnp.repeat(tokens, repeats=top_k, axis=0)
            token_segment_ids = jnp.repeat(jnp.arange(tokens.shape[0]), repeats=top_k, axis=0)

            # B. Dropping on the sender, then sort by (device, dropped, local expert).
            is_token_dropped = calculate_drop_token_mask(
                token_expert_ids=expert_ids_flat, token_expert_probs=expert_probs_flat,
                num_experts=num_total_experts, expert_capacity=expert_capacity)
            target_device_ids, target_local_expert_ids = jnp.divmod(expert_ids_flat, num_experts_per_device)
            index_to_sorted_for_dispatch = jnp.lexsort(
                (target_local_expert_ids, is_token_dropped, target_device_ids))
            tokens_sorted_for_dispatch = tokens_flat[index_to_sorted_for_dispatch]
            expert_probs_sorted_for_dispatch = expert_probs_flat[index_to_sorted_for_dispatch]
            target_local_expert_ids_sorted_for_dispatch = target_local_expert_ids[index_to_sorted_for_dispatch]
            token_segment_ids_sorted_for_dispatch = token_segment_ids[index_to_sorted_for_dispatch]
            dispatcher = MOERaggedDispatcher.from_target_device_ids(
                target_device_ids, axis_name=expert_axis_name, mask=~is_token_dropped)
            receiver_capacity = device_capacity * num_devices_ep
            recv_tokens, _ = dispatcher.dispatch_forward(tokens_sorted_for_dispatch, receiver_capacity)
            recv_probs, _ = dispatcher.dispatch_forward(expert_probs_sorted_for_dispatch, receiver_capacity)
            recv_local_expert_ids, is_valid = dispatcher.dispatch_forward(
                target_local_expert_ids_sorted_for_dispatch, receiver_capacity)

            # C. Experts: group the received tokens by local expert, one ragged_dot.
            safe_local_expert_ids = jnp.where(is_valid, recv_local_expert_ids, num_experts_per_device)
            indices_to_sort_by_local_expert = jnp.argsort(safe_local_expert_ids)
            recv_tokens_by_local_expert = recv_tokens[indices_to_sort_by_local_expert]
            recv_probs_by_local_expert = recv_probs[indices_to_sort_by_local_expert]
            local_expert_token_count = jnp.bincount(
                safe_local_expert_ids, weights=is_valid.astype(safe_local_expert_ids.dtype),
                length=num_experts_per_device)
            expert_outputs = jax.lax.ragged_dot(recv_tokens_by_local_expert, local_expert_weights,
                                                group_sizes=local_expert_token_count)
            expert_outputs = expert_outputs * recv_probs_by_local_expert[:, None]

            # D. Return trip, then sum each token's k contributions.
            indices_invert_sort_by_local_expert = jnp.argsort(indices_to_sort_by_local_expert)
            packed_outputs = expert_outputs[indices_invert_sort_by_local_expert]
            tokens_moe_back, _ = dispatcher.dispatch_backward(
                packed_outputs, capacity=tokens_sorted_for_dispatch.shape[0])
            combined_output = jax.ops.segment_sum(tokens_moe_back,
                                                  segment_ids=token_segment_ids_sorted_for_dispatch,
                                                  num_segments=tokens.shape[0])
            return combined_output.reshape(x_shard.shape)

        return _sharded_moe_impl(sequences, router_weights, expert_weights)

    return dict(calculate_offsets=calculate_offsets, calculate_drop_token_mask=calculate_drop_token_mask,
                MOERaggedDispatcher=MOERaggedDispatcher, moe_layer=moe_layer)


# --- the NumPy reference ----------------------------------------------------------

def numpy_capacity(tokens_per_device, top_k, ep, num_experts, capacity_factor):
    return math.ceil(tokens_per_device * top_k * ep / num_experts * capacity_factor)


def numpy_drop_mask(expert_ids, probs, capacity):
    """Within each expert, pairs ranked by probability (descending, ties by
    position) at or past `capacity` are dropped."""
    dropped = np.zeros(len(expert_ids), bool)
    for e in np.unique(expert_ids):
        members = np.flatnonzero(expert_ids == e)
        ranked = members[np.argsort(-probs[members], kind="stable")]
        dropped[ranked[capacity:]] = True
    return dropped


def numpy_route(tokens, router_weights, top_k):
    """Top-k experts per token (largest logits, ties to the lower index) and the
    softmax of their logits, flattened token-major."""
    logits = tokens.astype(np.float64) @ router_weights
    ids = np.argsort(-logits, axis=-1, kind="stable")[:, :top_k]
    top = np.take_along_axis(logits, ids, axis=-1)
    probs = np.exp(top - top.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return ids.ravel(), probs.ravel()


def numpy_moe_block(tokens, router_weights, expert_weights, top_k, ep, capacity_factor):
    """One device's tokens: every kept (token, expert) pair adds
    prob * token @ expert_weights[expert]; dropped pairs add nothing."""
    ids, probs = numpy_route(tokens, router_weights, top_k)
    capacity = numpy_capacity(len(tokens), top_k, ep, expert_weights.shape[0], capacity_factor)
    dropped = numpy_drop_mask(ids, probs, capacity)
    out = np.zeros(tokens.shape, np.float64)
    for pair, (e, p) in enumerate(zip(ids, probs)):
        if not dropped[pair]:
            out[pair // top_k] += p * (tokens[pair // top_k] @ expert_weights[e])
    return out, dropped


def numpy_moe_layer(x, router_weights, expert_weights, *, mesh_shape, top_k, capacity_factor=1.2):
    """The whole layer: x [batch, seq, hidden] split into (dp, ep) blocks, each
    routed and capped on its own. Returns (output, number of dropped pairs)."""
    dp, ep = mesh_shape
    x64, rw, ew = (np.asarray(a, np.float64) for a in (x, router_weights, expert_weights))
    out = np.zeros_like(x64)
    b, s = x.shape[0] // dp, x.shape[1] // ep
    dropped = 0
    for i in range(dp):
        for j in range(ep):
            block = x64[i * b:(i + 1) * b, j * s:(j + 1) * s]
            y, d = numpy_moe_block(block.reshape(-1, x.shape[-1]), rw, ew, top_k, ep, capacity_factor)
            out[i * b:(i + 1) * b, j * s:(j + 1) * s] = y.reshape(block.shape)
            dropped += int(d.sum())
    return out, dropped


def numpy_moe_layer_grads(x, router_weights, expert_weights, ct, *, mesh_shape, top_k,
                          capacity_factor=1.2):
    """Gradients of sum(moe_layer(x, rw, ew) * ct) w.r.t. x, rw and ew by hand:
    out_t = sum over kept pairs j of p_j x_t W_{e_j}, p = softmax of the top-k
    logits x_t rw (routing and dropping are piecewise constant)."""
    dp, ep = mesh_shape
    x64, rw, ew, g64 = (np.asarray(a, np.float64) for a in (x, router_weights, expert_weights, ct))
    hidden = x.shape[-1]
    dx, drw, dew = np.zeros_like(x64), np.zeros_like(rw), np.zeros_like(ew)
    b, s = x.shape[0] // dp, x.shape[1] // ep
    for i in range(dp):
        for j in range(ep):
            where = (slice(i * b, (i + 1) * b), slice(j * s, (j + 1) * s))
            tokens, g = x64[where].reshape(-1, hidden), g64[where].reshape(-1, hidden)
            ids, probs = numpy_route(tokens, rw, top_k)
            capacity = numpy_capacity(len(tokens), top_k, ep, ew.shape[0], capacity_factor)
            kept = ~numpy_drop_mask(ids, probs, capacity)
            d_tokens = np.zeros_like(tokens)
            for t in range(len(tokens)):
                pairs = range(t * top_k, (t + 1) * top_k)
                dprob = np.array([kept[q] * (tokens[t] @ ew[ids[q]]) @ g[t] for q in pairs])
                p = probs[t * top_k:(t + 1) * top_k]
                dlogit = p * (dprob - p @ dprob)
                for q, dz in zip(pairs, dlogit):
                    if kept[q]:
                        dew[ids[q]] += probs[q] * np.outer(tokens[t], g[t])
                        d_tokens[t] += probs[q] * ew[ids[q]] @ g[t]
                    drw[:, ids[q]] += dz * tokens[t]
                    d_tokens[t] += dz * rw[:, ids[q]]
            dx[where] = d_tokens.reshape(x64[where].shape)
    return dx, drw, dew


def random_problem(rng, mesh_shape, *, batch_per_dp=2, seq_per_ep=4, hidden=8, experts_per_device=2):
    dp, ep = mesh_shape
    x = rng.standard_normal((dp * batch_per_dp, ep * seq_per_ep, hidden)).astype(np.float32)
    rw = rng.standard_normal((hidden, ep * experts_per_device)).astype(np.float32)
    ew = (rng.standard_normal((ep * experts_per_device, hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    return x, rw, ew


def run():
    """The layer on a (2, 4) mesh, with and without dropping, and its gradients,
    against NumPy."""
    import meshsim

    env = build(meshsim)
    mesh = meshsim.sharding.Mesh(np.array(meshsim.devices()).reshape(2, 4), ("dp", "ep"))
    x, rw, ew = random_problem(np.random.default_rng(0), (2, 4))
    checks = [("calculate_offsets([2, 3, 1])", env["calculate_offsets"](meshsim.numpy.array([2, 3, 1])),
               np.array([0, 2, 5]))]
    for top_k, cf in ((2, 1.2), (2, 0.3), (1, 0.5)):
        want, _ = numpy_moe_layer(x, rw, ew, mesh_shape=(2, 4), top_k=top_k, capacity_factor=cf)
        got = env["moe_layer"](x, rw, ew, mesh=mesh, top_k=top_k, capacity_factor=cf)
        checks.append((f"moe_layer top_k={top_k} capacity_factor={cf}", got, want))
    ct = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)

    def loss(x, rw, ew):
        return (env["moe_layer"](x, rw, ew, mesh=mesh, top_k=2, capacity_factor=0.3) * ct).sum()

    grads = meshsim.grad(loss, argnums=(0, 1, 2))(x, rw, ew)
    want = numpy_moe_layer_grads(x, rw, ew, ct, mesh_shape=(2, 4), top_k=2, capacity_factor=0.3)
    for name, g, w in zip(("x", "router_weights", "expert_weights"), grads, want):
        checks.append((f"moe_layer gradient w.r.t. {name}", g, w))
    return checks
