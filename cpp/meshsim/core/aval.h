// Aval: the abstract value every primitive rule computes — shape, dtype, weak
// type, varying manual axes (VMA) and the sharding over Explicit mesh axes.
#pragma once
#include <string>
#include <vector>

#include "meshsim/core/dtype.h"
#include "meshsim/core/mesh.h"
#include "meshsim/core/shape.h"

namespace meshsim {

// Per dimension, the mesh axes it is split over (tuple order); empty = not split.
using Spec = std::vector<AxisNames>;

struct Aval {
  Shape shape;
  DType dtype = DType::Float32;
  bool weak_type = false;
  AxisNames vma;       // varying manual axes, kept in mesh order
  MeshPtr mesh;        // mesh the spec refers to (null: unsharded)
  Spec spec;           // empty or one entry per dimension
  // Pending reductions, kept in mesh order (JAX's {U:x}/{R:x}): over an `unreduced` axis the
  // value is the sum of the devices' full-shape blocks; a `reduced` axis holds equal blocks
  // that autodiff treats as the transpose of unreduced. Explicit and manual axes alike.
  AxisNames unreduced;
  AxisNames reduced;

  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  TypedDType typed_dtype() const { return {dtype, weak_type}; }
  bool same_type(const Aval& o) const;  // shape, dtype, weak type, vma, spec, (un)reduced
  std::string str_short(bool short_dtype = false) const;  // float32[1024@dp,4096]{V:tp, U:sp}
  std::string str() const;   // "~" prefix for weak types, as JAX's str(aval)
  std::string repr() const;  // ShapedArray(float32[8,4]) / with ", weak_type=True"
};

std::string spec_entry_str(const AxisNames& axes);  // "dp" or "(dp,tp)"

}  // namespace meshsim
