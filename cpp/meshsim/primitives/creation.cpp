// Creation primitives: values made from parameters alone.
#include "meshsim/ir/printing.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/families.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {

// lax.iota(dtype, size) generalised as broadcasted_iota(dtype, shape, dimension).
void iota() {
  Primitive p;
  p.name = "iota";
  p.operands = exactly(0);
  p.fused_into_readers = true;  // XLA recomputes it inside the readers that fuse it
  p.print_rule = [](PrintedEquation& e) { e.add("sharding"); };  // JAX's param, not stored here
  p.abstract_eval = [](const Avals&, const Params& params) {
    const Shape& shape = params.get<IntList>("shape");
    int64_t dim = params.get<int64_t>("dimension");
    normalize_axis(dim, static_cast<int64_t>(shape.size()), "iota dimension");
    Aval a;
    a.shape = shape;
    a.dtype = params.get<DType>("dtype");
    return Avals{a};
  };
  p.kernel = [](const Tensors&, const Params& params, const Avals& out) {
    const Shape& shape = out[0].shape;
    int64_t dim = params.get<int64_t>("dimension");
    Tensor t = Tensor::empty(out[0].dtype, shape);
    int64_t inner = 1;
    for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
    const int64_t n = shape.empty() ? 1 : shape[dim];
    auto fill = [&](auto tag) {
      using T = decltype(tag);
      T* o = t.data<T>();
      for (int64_t i = 0; i < t.size(); ++i) o[i] = static_cast<T>((i / inner) % n);
    };
    if (is_complex(t.dtype()))
      dispatch_complex(t.dtype(), fill);
    else
      dispatch_dtype(t.dtype(), fill);
    return as_tensors(std::move(t));
  };
  register_primitive(std::move(p));
}

}  // namespace

void register_creation_primitives() { iota(); }

}  // namespace meshsim
