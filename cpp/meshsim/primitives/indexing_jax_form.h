// JAX's own form of gather and scatter (XLA's dimension numbers), accepted by
// the same primitives as the form of indexing_common.h:
//
//   gather(operand, indices; dimension_numbers, slice_sizes, mode, fill_value,
//          indices_are_sorted, unique_indices)
//   scatter*(operand, indices, updates; dimension_numbers, mode,
//            indices_are_sorted, unique_indices)
//
// `indices` holds one index vector per position along its last dimension
// (JAX's index_vector_dim), `dimension_numbers` five lists: GatherDimensionNumbers'
// (offset_dims, collapsed_slice_dims, start_index_map, operand_batching_dims,
// start_indices_batching_dims) or ScatterDimensionNumbers' (update_window_dims,
// inserted_window_dims, scatter_dims_to_operand_dims, operand_batching_dims,
// scatter_indices_batching_dims); `mode` "promise_in_bounds", "clip" or
// "fill_or_drop" (GatherScatterMode). Such an equation prints as JAX's, and
// every rule runs on its translation to our form: one index array per indexed
// axis (a negative index is out of range, as XLA reads it, not counted from
// the end), batching dims as our batch_axes. Dimension numbers our form cannot
// express (slices wider than one element along an indexed dim, result batch
// dims apart) are refused; meshsim.lax.gather composes those instead.
#pragma once
#include "meshsim/ir/primitive.h"

namespace meshsim::indexing {

bool is_jax_form(const Params& params);
// Wraps every rule of a gather (scatter = false) or scatter primitive so that
// it also takes JAX's form.
void accept_jax_form(Primitive& p, bool scatter);

}  // namespace meshsim::indexing
