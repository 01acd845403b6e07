// Elementwise loops over any strides. Contiguous operands take one tight loop
// the compiler vectorises. Otherwise dimensions are merged where every operand
// allows it and the innermost loop is specialised for the broadcast patterns
// NumPy-style code produces (array + scalar, matrix + row), so that a stride-0
// operand from `broadcast_in_dim` costs no more than a contiguous one.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "meshsim/core/tensor.h"
#include "meshsim/kernels/complex_math.h"
#include "meshsim/core/strided.h"

namespace meshsim {

// A view of N operands of one shape with dimensions merged: size-1 dimensions
// dropped, and neighbours d, d+1 joined wherever every operand has
// stride[d] == stride[d+1] * shape[d+1] (true for contiguous and broadcast runs).
template <size_t N>
struct MergedLayout {
  Shape shape;
  std::array<Strides, N> strides;
};

template <size_t N>
MergedLayout<N> merge_dims(const Shape& shape, const std::array<const Strides*, N>& strides) {
  MergedLayout<N> m;
  m.shape.reserve(shape.size());
  for (Strides& s : m.strides) s.reserve(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool joins = !m.shape.empty();
    for (size_t k = 0; k < N && joins; ++k)
      joins = m.strides[k].back() == (*strides[k])[d] * shape[d];
    if (joins) {
      m.shape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) m.strides[k].back() = (*strides[k])[d];
    } else {
      m.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) m.strides[k].push_back((*strides[k])[d]);
    }
  }
  return m;
}

// Calls run(offsets, inner_strides, inner_size) once per innermost row of the
// merged layout; the output is written contiguously in the same order.
template <size_t N, class Run>
void for_each_row(const Shape& shape, const std::array<const Strides*, N>& strides, Run&& run) {
  MergedLayout<N> m = merge_dims<N>(shape, strides);
  std::array<int64_t, N> inner_stride{};
  int64_t inner = 1;
  if (!m.shape.empty()) {
    inner = m.shape.back();
    m.shape.pop_back();
    for (size_t k = 0; k < N; ++k) {
      inner_stride[k] = m.strides[k].back();
      m.strides[k].pop_back();
    }
  }
  std::array<const Strides*, N> outer;
  for (size_t k = 0; k < N; ++k) outer[k] = &m.strides[k];
  for_each_offsets<N>(m.shape, outer, [&](const std::array<int64_t, N>& off) {
    run(off, inner_stride, inner);
  });
}

template <class In, class Out, class Op>
Tensor map_unary(const Tensor& x, DType out_dtype, Op op) {
  Tensor out = Tensor::empty(out_dtype, x.shape());
  const In* a = x.data<In>();
  Out* o = out.data<Out>();
  if (x.is_contiguous()) {
    const int64_t n = x.size();
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i]);
  } else if (out.size() > 0) {
    for_each_row<1>(x.shape(), {&x.strides()}, [&](const auto& off, const auto& st, int64_t n) {
      const In* p = a + off[0];
      for (int64_t i = 0; i < n; ++i) o[i] = op(p[i * st[0]]);
      o += n;
    });
  }
  return out;
}

// One row of a binary map; the stride patterns get their own loops so the
// common ones vectorise.
template <class In, class Out, class Op>
inline void binary_row(const In* a, int64_t sa, const In* b, int64_t sb, Out* o, int64_t n, Op& op) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const In bv = *b;
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], bv);
  } else if (sa == 0 && sb == 1) {
    const In av = *a;
    for (int64_t i = 0; i < n; ++i) o[i] = op(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i * sa], b[i * sb]);
  }
}

// Either operand may be a scalar (rank 0) next to an array, as lax allows: it
// is read as a broadcast view.
template <class In, class Out, class Op>
Tensor map_binary(const Tensor& x_in, const Tensor& y_in, DType out_dtype, Op op) {
  const bool x_scalar = x_in.ndim() == 0 && y_in.ndim() > 0;
  const bool y_scalar = y_in.ndim() == 0 && x_in.ndim() > 0;
  // Operands of one rank whose size-1 dims broadcast (`add f32[8,8] f32[1,8]`).
  const bool expanded = !x_scalar && !y_scalar && x_in.shape() != y_in.shape();
  // The operands themselves, or a view made for a broadcast one (a Tensor copy
  // allocates its shape and strides).
  Tensor x_view, y_view;
  if (expanded) {
    Shape shape = x_in.shape();
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] == 1) shape[d] = y_in.shape()[d];
    x_view = x_in.broadcast_to(shape);
    y_view = y_in.broadcast_to(shape);
  }
  if (x_scalar) x_view = x_in.broadcast_to(y_in.shape());
  if (y_scalar) y_view = y_in.broadcast_to(x_in.shape());
  const Tensor& x = x_scalar || expanded ? x_view : x_in;
  const Tensor& y = y_scalar || expanded ? y_view : y_in;
  Tensor out = Tensor::empty(out_dtype, x.shape());
  const In* a = x.data<In>();
  const In* b = y.data<In>();
  Out* o = out.data<Out>();
  if (x.is_contiguous() && y.is_contiguous()) {
    binary_row(a, 1, b, 1, o, x.size(), op);
  } else if (y_scalar && x.is_contiguous()) {
    binary_row(a, 1, b, 0, o, x.size(), op);
  } else if (x_scalar && y.is_contiguous()) {
    binary_row(a, 0, b, 1, o, y.size(), op);
  } else if (out.size() > 0) {
    for_each_row<2>(x.shape(), {&x.strides(), &y.strides()},
                    [&](const auto& off, const auto& st, int64_t n) {
                      binary_row(a + off[0], st[0], b + off[1], st[1], o, n, op);
                      o += n;
                    });
  }
  return out;
}

// Three operands of one element type and shape (clamp); no fast paths needed.
template <class T, class Op>
Tensor map_ternary(const Tensor& x, const Tensor& y, const Tensor& z, Op op) {
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  const T *a = x.data<T>(), *b = y.data<T>(), *c = z.data<T>();
  T* o = out.data<T>();
  if (out.size() == 0) return out;
  for_each_row<3>(x.shape(), {&x.strides(), &y.strides(), &z.strides()},
                  [&](const auto& off, const auto& st, int64_t n) {
                    for (int64_t i = 0; i < n; ++i)
                      o[i] = op(a[off[0] + i * st[0]], b[off[1] + i * st[1]], c[off[2] + i * st[2]]);
                    o += n;
                  });
  return out;
}

// Element values as kernels compute with them. XLA on CPU computes with
// denormals flushed to zero (inputs and results), which the kernels' thread
// does too (core/denormals.h); a bfloat16 subnormal widens to a float32
// subnormal, so it is flushed the same way. Complex parts are flushed
// explicitly, as the complex formulas (complex_math.h) need.
template <class T>
inline compute_type_t<T> to_compute(T x) {
  if constexpr (is_complex_v<T>) {
    return flush_subnormal(x);
  } else {
    return static_cast<compute_type_t<T>>(x);
  }
}
template <class T>
inline T from_compute(compute_type_t<T> y) {
  if constexpr (is_complex_v<T>)
    return flush_subnormal(y);
  else
    return static_cast<T>(y);
}

// One batch of map_unary_simd: `vec_op` on the lanes at `src`, and
// `scalar_op` on those with |x| >= `vec_limit`.
template <class C, class VecOp, class ScalarOp>
inline void unary_simd_batch(const C* src, C* dst, VecOp& vec_op, ScalarOp& scalar_op, C vec_limit) {
  using Batch = xsimd::batch<C>;
  const Batch v = Batch::load_unaligned(src);
  vec_op(v).store_unaligned(dst);
  if (xsimd::any(xsimd::abs(v) >= Batch(vec_limit)))
    for (size_t k = 0; k < Batch::size; ++k)
      if (std::abs(src[k]) >= vec_limit) dst[k] = scalar_op(src[k]);
}

// map_unary_simd on `n` contiguous elements of a wide float type C: whole
// batches from `a` on, the last partial batch padded with zeros. (A caller
// running a longer array in pieces starting at multiples of the batch size
// computes what one call on the whole array does.)
template <class C, class VecOp, class ScalarOp>
void unary_simd_row(const C* a, C* o, int64_t n, VecOp& vec_op, ScalarOp& scalar_op, C vec_limit) {
  constexpr int64_t lanes = xsimd::batch<C>::size;
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) unary_simd_batch(a + i, o + i, vec_op, scalar_op, vec_limit);
  if (i < n) {
    C src[lanes] = {}, dst[lanes];
    std::copy(a + i, a + n, src);
    unary_simd_batch(src, dst, vec_op, scalar_op, vec_limit);
    std::copy(dst, dst + (n - i), o + i);
  }
}

// A float32 or float64 map in SIMD batches (xsimd, for the ISA the build
// targets): `vec_op` maps an xsimd::batch<T>, `scalar_op` a T. Every element
// goes through the same path whatever its position (the tail runs as a
// zero-padded batch), except that elements with |x| >= `vec_limit` take
// `scalar_op`: for functions whose vector form is only accurate on part of the
// domain (exp near overflow). Narrow floats: map_unary_simd_narrow
// (narrow_float_blocks.h).
template <class T, class VecOp, class ScalarOp>
Tensor map_unary_simd(const Tensor& x, VecOp vec_op, ScalarOp scalar_op, T vec_limit) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const Tensor in = x.contiguous();
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  unary_simd_row(in.data<T>(), out.data<T>(), in.size(), vec_op, scalar_op, vec_limit);
  return out;
}

}  // namespace meshsim
