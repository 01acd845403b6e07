// fft: XLA's FFT over the trailing len(fft_lengths) dimensions, with JAX's
// params fft_type (0 FFT, 1 IFFT, 2 RFFT, 3 IRFFT, as lax.FftType) and
// fft_lengths. The inverse transforms scale by 1/prod(fft_lengths), as XLA's.
//
// The kernel is pocketfft (BSD, header-only; the copy NumPy's source
// distribution ships, fetched by scripts/fetch-pocketfft), run single-threaded
// on each device's block: the parallelism comes from the devices. The VJPs
// are JAX's transposes, written with the primitive itself, so they
// differentiate, batch and shard like the forward.
#define POCKETFFT_NO_MULTITHREADING
#include <pocketfft_hdronly.h>

#include <cmath>
#include <numeric>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/fft.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"

namespace meshsim {
namespace {

constexpr const char* kFft = "fft";
enum FftType : int64_t { kForward = 0, kInverse = 1, kRealForward = 2, kRealInverse = 3 };

struct FftParams {
  FftType type;
  IntList lengths;
};

FftParams fft_params(const Params& p) {
  const int64_t type = p.get<int64_t>("fft_type");
  if (type < kForward || type > kRealInverse) fail<TypeError>("Unknown FFT type value '", type, "'");
  return {static_cast<FftType>(type), p.get<IntList>("fft_lengths")};
}

std::string tuple_str(const IntList& xs) { return param_value_str(xs); }

// The trailing `k` dims of `shape`.
IntList minor(const Shape& shape, size_t k) { return IntList(shape.end() - k, shape.end()); }

DType complex_of(DType real) { return real == DType::Float64 ? DType::Complex128 : DType::Complex64; }
DType real_of(DType complex) { return complex == DType::Complex128 ? DType::Float64 : DType::Float32; }

// ---- type rule (JAX's fft_abstract_eval; IRFFT's last dim as XLA checks it) ---

Avals fft_eval(const Avals& in, const Params& p) {
  const Aval& x = in[0];
  const FftParams f = fft_params(p);
  const size_t k = f.lengths.size();
  const std::string shape = tuple_str(IntList(x.shape.begin(), x.shape.end()));
  if (k > x.shape.size())
    fail<ValueError>("FFT input shape ", shape, " must have at least as many input dimensions as fft_lengths ",
                     tuple_str(f.lengths), ".");
  Shape out = x.shape;
  DType dtype = x.dtype;
  if (f.type == kRealForward) {
    if (x.dtype != DType::Float32 && x.dtype != DType::Float64)
      fail<ValueError>("RFFT input must be float32 or float64, got ", dtype_name(x.dtype));
    if (minor(x.shape, k) != f.lengths)
      fail<ValueError>("RFFT input shape ", shape, " minor dimensions must be equal to fft_lengths ",
                       tuple_str(f.lengths));
    out.back() = f.lengths.back() / 2 + 1;
    dtype = complex_of(x.dtype);
  } else if (f.type == kRealInverse) {
    if (!is_complex(x.dtype))
      fail<ValueError>("IRFFT input must be complex64 or complex128, got ", dtype_name(x.dtype));
    const IntList m = minor(x.shape, k);
    if (!std::equal(m.begin(), m.end() - 1, f.lengths.begin()))
      fail<ValueError>("IRFFT input shape ", shape, " minor dimensions must be equal to all except the last "
                       "fft_length, got fft_lengths=", tuple_str(f.lengths));
    if (m.back() != f.lengths.back() / 2 + 1)
      fail<ValueError>("IRFFT requires innermost dimension to be compatible with fft_length[-1]/2+1. Got: ",
                       m.back(), " but fft_length is ", f.lengths.back(), ".");
    out.back() = f.lengths.back();
    dtype = real_of(x.dtype);
  } else {
    if (!is_complex(x.dtype))
      fail<ValueError>("FFT input must be complex64 or complex128, got ", dtype_name(x.dtype));
    if (minor(x.shape, k) != f.lengths)
      fail<ValueError>("FFT input shape ", shape, " minor dimensions must be equal to fft_lengths ",
                       tuple_str(f.lengths));
  }
  return {like(x, out, dtype)};
}

// ---- kernel --------------------------------------------------------------------

pocketfft::shape_t dims_of(const Shape& shape) { return pocketfft::shape_t(shape.begin(), shape.end()); }

// Byte strides of a contiguous array of `shape` with `item`-byte elements.
pocketfft::stride_t packed_strides(const Shape& shape, size_t item) {
  pocketfft::stride_t s(shape.size());
  ptrdiff_t step = static_cast<ptrdiff_t>(item);
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = step;
    step *= static_cast<ptrdiff_t>(shape[d]);
  }
  return s;
}

template <class R>
void run_fft(const FftParams& f, const Tensor& x, const Tensor& out) {
  using C = std::complex<R>;
  const size_t k = f.lengths.size(), nd = x.shape().size();
  pocketfft::shape_t axes(k);
  std::iota(axes.begin(), axes.end(), nd - k);
  const R n = static_cast<R>(std::accumulate(f.lengths.begin(), f.lengths.end(), int64_t{1},
                                             std::multiplies<int64_t>()));
  const R inverse_scale = R(1) / n;
  switch (f.type) {
    case kForward:
    case kInverse:
      pocketfft::c2c(dims_of(x.shape()), packed_strides(x.shape(), sizeof(C)),
                     packed_strides(out.shape(), sizeof(C)), axes, f.type == kForward, x.data<C>(),
                     out.data<C>(), f.type == kForward ? R(1) : inverse_scale);
      break;
    case kRealForward:
      pocketfft::r2c(dims_of(x.shape()), packed_strides(x.shape(), sizeof(R)),
                     packed_strides(out.shape(), sizeof(C)), axes, true, x.data<R>(), out.data<C>(), R(1));
      break;
    case kRealInverse:
      pocketfft::c2r(dims_of(out.shape()), packed_strides(x.shape(), sizeof(C)),
                     packed_strides(out.shape(), sizeof(R)), axes, false, x.data<C>(), out.data<R>(),
                     inverse_scale);
      break;
  }
}

Tensors fft_kernel(const Tensors& in, const Params& p, const Avals& out) {
  const FftParams f = fft_params(p);
  const Tensor x = in[0].contiguous();
  if (num_elements(out[0].shape) == 0) return {Tensor::zeros(out[0].dtype, out[0].shape)};
  if (x.size() == 0) return {Tensor::zeros(out[0].dtype, out[0].shape)};  // irfft of an empty half-spectrum
  Tensor result = Tensor::empty(out[0].dtype, out[0].shape);
  const DType real = is_complex(x.dtype()) ? real_of(x.dtype()) : x.dtype();
  if (real == DType::Float64)
    run_fft<double>(f, x, result);
  else
    run_fft<float>(f, x, result);
  return {result};
}

// XLA's cost analysis: 8 flops (four complex FMAs) per operand element and
// floor(log2(length)) of every transformed dimension.
Cost fft_cost(const Avals& in, const Params& p, const Avals& out) {
  Cost cost = memory_cost(in, out);
  double log_factors = 1;
  for (int64_t n : fft_params(p).lengths) log_factors *= n > 0 ? std::floor(std::log2(static_cast<double>(n))) : 0;
  cost.flops = 8 * log_factors * static_cast<double>(num_elements(in[0].shape));
  return cost;
}

// ---- VJP (JAX's transposes: FFT and IFFT are their own transposes) -----------

Value bind_fft(const Value& x, FftType type, const IntList& lengths) {
  return ops::bind1(kFft, {x}, {{"fft_lengths", lengths}, {"fft_type", static_cast<int64_t>(type)}});
}

// 1 at DC (and at Nyquist for an even length), 2 elsewhere: the weight of each
// stored bin of a half-spectrum among the full spectrum's bins.
Value half_spectrum_weights(int64_t n, int64_t bins, DType dtype, size_t ndim) {
  Shape shape(ndim, 1);
  shape.back() = bins;
  const Value i = ops::iota(DType::Int32, shape, static_cast<int64_t>(ndim) - 1);
  Value edge = ops::eq(i, ops::full(shape, DType::Int32, 0));
  if (n % 2 == 0) edge = ops::bind1("or", {edge, ops::eq(i, ops::full(shape, DType::Int32, bins - 1))});
  return ops::select(edge, ops::full(shape, dtype, 1), ops::full(shape, dtype, 2));
}

Value conj(const Value& x) { return ops::bind1("conj", {x}, {{"input_dtype", aval_of(x).dtype}}); }

Value broadcast_to(const Value& x, const Shape& shape) {
  IntList dims(shape.size());
  std::iota(dims.begin(), dims.end(), 0);
  return ops::broadcast_in_dim(x, shape, dims);
}

// RFFT's transpose: an IRFFT of the conjugated cotangent with the doubled bins
// halved, times N.
Value rfft_transpose(const Value& g, const IntList& lengths) {
  const Aval ga = aval_of(g);
  const double n = std::accumulate(lengths.begin(), lengths.end(), 1.0, std::multiplies<double>());
  const Value w = broadcast_to(half_spectrum_weights(lengths.back(), ga.shape.back(), ga.dtype, ga.ndim()),
                               ga.shape);
  const Value out = bind_fft(ops::div(conj(g), w), kRealInverse, lengths);
  return ops::mul(out, ops::full(aval_of(out).shape, aval_of(out).dtype, n));
}

// IRFFT's transpose: the conjugated RFFT of the cotangent with the
// de-duplicated bins doubled, over N.
Value irfft_transpose(const Value& g, const IntList& lengths) {
  const Value x = bind_fft(g, kRealForward, lengths);
  const Aval xa = aval_of(x);
  const double n = std::accumulate(lengths.begin(), lengths.end(), 1.0, std::multiplies<double>());
  const Value w = broadcast_to(half_spectrum_weights(lengths.back(), xa.shape.back(), xa.dtype, xa.ndim()),
                               xa.shape);
  return conj(ops::mul(ops::mul(ops::full(xa.shape, xa.dtype, 1 / n), w), x));
}

Cotangents fft_vjp(const VjpArgs& a) {
  const FftParams f = fft_params(a.params);
  const Value& g = *a.ct[0];
  Value ct;
  if (f.type == kRealForward)
    ct = rfft_transpose(g, f.lengths);
  else if (f.type == kRealInverse)
    ct = irfft_transpose(g, f.lengths);
  else
    ct = bind_fft(g, f.type, f.lengths);
  return {ops::reshard_like(ct, aval_of(a.in[0]))};
}

// ---- batching (JAX's: the batch dimension moves to the front) -----------------

Batched fft_batch(const BatchArgs& a) { return bind_at_front(a, a.params); }

// ---- sharding in types ---------------------------------------------------------

// JAX keeps the operand's sharding, dimension by position; a transformed dim
// whose length changes (RFFT, IRFFT) must still divide among its devices.
std::vector<Spec> fft_rule(const Avals& in, const Params&, const Avals& out) {
  const Aval& x = in[0];
  const Spec s = spec_of(x);
  const Shape& shape = out[0].shape;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d].empty()) continue;
    const int64_t n = entry_size(*x.mesh, s[d]);
    if (shape[d] % n == 0) continue;
    Aval o = out[0];
    o.mesh = x.mesh;
    o.spec = s;
    std::string axes = "(";
    for (size_t i = 0; i < s[d].size(); ++i) axes += (i ? ", '" : "'") + s[d][i] + "'";
    axes += s[d].size() == 1 ? ",)" : ")";
    fail<ValueError>("Sharding spec ", axes, " implies that array axis ", d, " is partitioned ", n,
                     " times, but does not evenly divide the dimension size ", shape[d], ". Got shape: ",
                     tuple_str(IntList(shape.begin(), shape.end())), " and sharding ", type_sharding_repr(o));
  }
  return {s};
}

// Each device transforms its own blocks of the leading dims; the transformed
// dims are gathered whole first and the result resharded to its type.
std::optional<LocalPlan> fft_plan(const Avals& in, const Params& p, const Avals& out) {
  const size_t k = fft_params(p).lengths.size(), nd = in[0].shape.size();
  Spec s = spec_of(in[0]);
  for (size_t d = nd - k; d < nd; ++d) s[d].clear();
  LocalPlan plan;
  plan.in_specs = {s};
  plan.params = p;
  plan.out_specs = {s};
  return plan;
}

std::optional<FactorMap> fft_factors(const Avals& in, const Params& p, const Avals& out) {
  const int64_t k = static_cast<int64_t>(fft_params(p).lengths.size()), nd = in[0].ndim();
  IntList whole(k);
  std::iota(whole.begin(), whole.end(), nd - k);
  return keep_dims_factors(in, out, whole, {}, false);
}

}  // namespace

void register_fft_primitive() {
  Primitive p;
  p.name = kFft;
  p.operands = exactly(1);
  p.abstract_eval = fft_eval;
  p.kernel = fft_kernel;
  p.vjp = fft_vjp;
  p.batch = fft_batch;
  p.cost = fft_cost;
  p.sharding_rule = fft_rule;
  p.local_plan = fft_plan;
  p.factors = fft_factors;
  register_primitive(std::move(p));
}

}  // namespace meshsim
