// Structural primitives: they move or view data without arithmetic.
// broadcast_in_dim, transpose and reshape of contiguous data are zero-copy views.
#include <numeric>

#include "meshsim/ir/primitive.h"
#include "meshsim/primitives/families.h"

namespace meshsim {
namespace {

// lax.broadcast_in_dim(x, shape, broadcast_dimensions): operand dim i maps to
// output dim broadcast_dimensions[i] and must be 1 or equal to it.
void broadcast_in_dim() {
  Primitive p;
  p.name = "broadcast_in_dim";
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Shape& shape = params.get<IntList>("shape");
    const IntList& dims = params.get<IntList>("broadcast_dimensions");
    const Aval& x = in[0];
    if (static_cast<int64_t>(dims.size()) != x.ndim())
      fail<TypeError>("broadcast_in_dim broadcast_dimensions must have length equal to operand ndim; "
                      "got broadcast_dimensions ", param_value_str(dims), " for operand ndim ", x.ndim(), ".");
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(shape.size()))
        fail<TypeError>("broadcast_in_dim broadcast_dimensions must be valid indices of shape ",
                        shape_str(shape), ", got ", param_value_str(dims));
      if (i > 0 && dims[i] <= dims[i - 1])
        fail<TypeError>("broadcast_in_dim broadcast_dimensions must be strictly increasing; got ",
                        param_value_str(dims));
      if (x.shape[i] != 1 && x.shape[i] != shape[dims[i]])
        fail<TypeError>("broadcast_in_dim operand dimension sizes must either be 1, or be equal to "
                        "their corresponding dimensions in the target broadcast shape; got operand "
                        "of shape ", shape_str(x.shape), ", target broadcast shape ", shape_str(shape),
                        ", broadcast_dimensions ", param_value_str(dims));
    }
    return Avals{like(x, shape, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const IntList& dims = params.get<IntList>("broadcast_dimensions");
    const Tensor& x = in[0];
    Strides st(out[0].shape.size(), 0);
    for (size_t i = 0; i < dims.size(); ++i)
      if (x.shape()[i] != 1) st[dims[i]] = x.strides()[i];
    return Tensors{x.view(out[0].shape, st, 0)};
  };
  register_primitive(std::move(p));
}

void reshape() {
  Primitive p;
  p.name = "reshape";
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Shape& shape = params.get<IntList>("new_sizes");
    if (num_elements(shape) != num_elements(in[0].shape))
      fail<TypeError>("cannot reshape array of shape ", shape_str(in[0].shape), " (size ",
                      num_elements(in[0].shape), ") into shape ", shape_str(shape), " (size ",
                      num_elements(shape), ")");
    return Avals{like(in[0], shape, in[0].dtype, in[0].weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    return Tensors{in[0].reshape(out[0].shape)};
  };
  register_primitive(std::move(p));
}

void transpose() {
  Primitive p;
  p.name = "transpose";
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const IntList& perm = params.get<IntList>("permutation");
    const Aval& x = in[0];
    IntList sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    IntList iota(x.ndim());
    std::iota(iota.begin(), iota.end(), 0);
    if (sorted != iota)
      fail<TypeError>("transpose permutation isn't a permutation of operand dimensions, got "
                      "permutation ", param_value_str(perm), " for operand shape ", shape_str(x.shape), ".");
    Shape s;
    for (int64_t d : perm) s.push_back(x.shape[d]);
    return Avals{like(x, s, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
    return Tensors{in[0].transpose(params.get<IntList>("permutation"))};
  };
  register_primitive(std::move(p));
}

}  // namespace

void register_structural_primitives() {
  broadcast_in_dim();
  reshape();
  transpose();
}

}  // namespace meshsim
