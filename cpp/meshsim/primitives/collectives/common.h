// What the collective primitives share: their params, replica groups, VMA
// rules, block helpers, linear VJPs and communication models. Each family of
// collectives lives in one file of this folder and registers itself
// (primitives/families.h); its groups follow JAX's replica groups: devices
// that differ only along the named axes, members in tuple order.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/ir/xla_instruction.h"
#include "meshsim/runtime/mesh_executor.h"

namespace meshsim {

using Groups = std::vector<std::vector<int64_t>>;

// ---- params and types ----------------------------------------------------------

const StrList& axes_param(const Params& p);  // `axes` (psum, pvary)
// The named axes of a collective. JAX keeps `axis_name` as the caller gave
// it: one name (all_to_all) or a tuple of names.
AxisNames axis_names_param(const Params& p);
std::optional<IntLists> index_groups_param(const Params& p);
// `axis_index_groups` as a param value (None when absent).
ParamValue index_groups_value(const Params& p);
// The number of devices a collective over `axes` combines: the axes' total
// size, or the size of each of `axis_index_groups`, which must split the
// indices along the axes into equal groups.
int64_t group_size(const std::string& op, const AxisNames& axes, const Params& p);
// The replica groups (JAX's `_replica_groups`): members in tuple order, each
// group split further by `axis_index_groups` when given.
Groups replica_groups(const MeshContext& ctx, const AxisNames& axes, const Params& p);
int64_t dim_param(const Params& p, const char* name, int64_t bound, const std::string& op);

bool contains(const AxisNames& names, const std::string& n);
std::string names_str(const AxisNames& names);      // ('x', 'y')
std::string frozenset_str(const AxisNames& names);  // frozenset({'x'})
// `vma` with `drop` removed / `add` appended, in mesh order.
AxisNames vma_minus(const AxisNames& vma, const AxisNames& drop);
AxisNames vma_plus(const AxisNames& vma, const AxisNames& add);
// JAX's `collective_vma_rule`: a varying -> varying collective needs an
// operand varying over every axis it acts on (the wrappers cast it first).
AxisNames collective_vma(const std::string& name, const Aval& x, const AxisNames& axes);
// The batching rule of collectives that act on each element of each operand
// alike (psum, pvary, ppermute, ...): the batch stays where each operand has it.
Batched batch_in_place(const BatchArgs& a);

// ---- blocks ----------------------------------------------------------------------
// Data-moving collectives run as tasks over (replica group, member): a task
// allocates or fills one member's result with memcpy-style block moves, so no
// two tasks write the same bytes and the result does not depend on the
// thread count.

Tensor slice_dim(const Tensor& t, int64_t dim, int64_t lo, int64_t hi);
// Every device's operand `k` in row-major layout (the kernels index it directly).
std::vector<Tensor> contiguous_operands(const MeshContext& ctx, const std::vector<Tensors>& in,
                                        size_t k = 0);
// Runs f(group, member) for every member of every group.
void for_each_member(const MeshContext& ctx, const Groups& groups,
                     const std::function<void(int64_t, int64_t)>& f);

// ---- autodiff ----------------------------------------------------------------------
// JAX's transposes (reference §2): psum <-> pvary, all_gather <-> reduce_scatter,
// all_gather_invariant -> a dynamic slice at this device's index, ppermute ->
// the inverse permutation, all_to_all -> split and concat axes swapped.

// A rule that maps the one operand's cotangent through `transpose`.
Primitive& with_linear_vjp(Primitive& p, std::function<Value(const Value& ct, const Params&)> transpose);
Params with(Params p, const std::string& key, ParamValue v);

// ---- communication models (Primitive::comm) ---------------------------------------

int64_t nbytes(const Tensor& t);
// Every member of every group sends and receives `bytes` in `steps` latency
// terms (ring schedules are symmetric).
Traffic symmetric_traffic(const MeshContext& ctx, AxisNames axes, Groups groups, int64_t bytes,
                          int64_t steps);
int64_t nbytes(const Aval& a);
// Sets `p`'s communication model to a ring over the groups of `n` members
// moving, per operand, `bytes(operand bytes, result bytes, n)` per device in
// `steps(n)` steps (groups split by `axis_index_groups` when `index_groups`).
using RingBytes = std::function<int64_t(int64_t in_bytes, int64_t out_bytes, int64_t n)>;
Primitive& with_ring_comm(Primitive& p, std::function<AxisNames(const Params&)> axes, bool index_groups,
                          RingBytes bytes, std::function<int64_t(int64_t n)> steps);

}  // namespace meshsim
