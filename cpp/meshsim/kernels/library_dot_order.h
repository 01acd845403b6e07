// The order in which XLA's CPU backend sums the terms of a float32 matrix
// product that it hands to its dot library (YNNPACK): which products go
// there, which of the library's register kernels runs, and so how each
// result element's k terms are grouped. The library picks a kernel by a cost
// model over the product's shape, and the kernel and the library's tiling of
// the result's columns fix the depth blocks; so the bits of an element depend
// on the whole (per-device) shape, as they do in a sharded JAX program.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "meshsim/kernels/gemm.h"

namespace meshsim {

// Result columns [begin, end) summed in `order`.
struct ColumnsOrder {
  int64_t begin, end;
  DepthOrder order;
};

// The operand layouts of a product c[m, n] = a[m, k] @ b[k, n], as XLA sees
// them: a with k after m (anything else is computed by XLA itself), and b
// with k before n, or after it ("transposed": the library then always
// repacks b).
struct LibraryDotShape {
  int64_t m, k, n;
  bool b_transposed;
};

// The column groups of the product and their depth orders when XLA hands it
// to the library; nullopt when XLA computes it itself (a matrix-vector
// product, one of fewer than 8 rows, columns and terms).
std::optional<std::vector<ColumnsOrder>> library_dot_order(const LibraryDotShape& shape);

// Whether float32 products follow the library's order (config option
// meshsim_xla_dot_library_order), process-wide. Off by default: the
// library's long depth blocks make a product computed in pieces (a sharded
// contraction summed over devices) differ from the whole product by more
// than programs written against accelerators expect (the seed notebook's
// allclose(..., atol=1e-4) checks), where meshsim's 256-term blocks keep
// them within it.
void set_library_dot_order_enabled(bool enabled);
bool library_dot_order_enabled();

}  // namespace meshsim
