#include "meshsim/core/dtype.h"

#include <array>
#include <atomic>
#include <bitset>
#include <vector>

#include "meshsim/core/error.h"

namespace meshsim {
namespace {

struct DTypeInfo { const char* name; const char* short_name; size_t itemsize; };
constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {"bool", "bool", 1}, {"int8", "i8", 1}, {"int16", "i16", 2}, {"int32", "i32", 4},
    {"int64", "i64", 8}, {"uint8", "u8", 1}, {"uint16", "u16", 2}, {"uint32", "u32", 4},
    {"uint64", "u64", 8}, {"float32", "f32", 4}, {"float64", "f64", 8},
    {"bfloat16", "bf16", 2}, {"float16", "f16", 2}, {"float8_e4m3fn", "f8_e4m3fn", 1},
    {"float8_e5m2", "f8_e5m2", 1}, {"float8_e4m3", "f8_e4m3", 1}, {"float8_e3m4", "f8_e3m4", 1},
    {"float8_e4m3fnuz", "f8_e4m3fnuz", 1}, {"float8_e5m2fnuz", "f8_e5m2fnuz", 1},
    {"float8_e4m3b11fnuz", "f8_e4m3b11fnuz", 1}, {"complex64", "c64", 8}, {"complex128", "c128", 16},
    {"int4", "i4", 1}, {"uint4", "u4", 1},
}};

std::atomic<bool> g_x64{false};
std::atomic<bool> g_strict{false};

// Nodes of JAX's promotion lattice (jax/_src/dtypes.py): one per dtype, plus
// the weak categories i*, f* and c* that Python scalars occupy.
constexpr int kIntWeak = kNumDTypes, kFloatWeak = kNumDTypes + 1, kComplexWeak = kNumDTypes + 2,
              kNodes = kNumDTypes + 3;
using NodeSet = std::bitset<kNodes>;

int node(DType d) { return static_cast<int>(d); }

// Direct successors of each node in the standard lattice.
std::array<std::vector<int>, kNodes> standard_successors() {
  std::array<std::vector<int>, kNodes> s;
  auto edge = [&](int from, std::initializer_list<DType> to) {
    for (DType t : to) s[from].push_back(node(t));
  };
  using D = DType;
  edge(node(D::Bool), {});
  s[node(D::Bool)].push_back(kIntWeak);
  // Four-bit integers sit below i* only: they never promote implicitly.
  edge(kIntWeak, {D::UInt8, D::Int8, D::UInt4, D::Int4});
  edge(node(D::UInt8), {D::Int16, D::UInt16});
  edge(node(D::UInt16), {D::Int32, D::UInt32});
  edge(node(D::UInt32), {D::Int64, D::UInt64});
  s[node(D::UInt64)].push_back(kFloatWeak);
  edge(node(D::Int8), {D::Int16});
  edge(node(D::Int16), {D::Int32});
  edge(node(D::Int32), {D::Int64});
  s[node(D::Int64)].push_back(kFloatWeak);
  // float8 formats sit below f* only: they never promote implicitly.
  for (int d = node(D::BFloat16); d <= node(D::Float8E4M3B11FNUZ); ++d) s[kFloatWeak].push_back(d);
  s[kFloatWeak].push_back(kComplexWeak);
  edge(node(D::BFloat16), {D::Float32});
  edge(node(D::Float16), {D::Float32});
  edge(node(D::Float32), {D::Float64, D::Complex64});
  edge(node(D::Float64), {D::Complex128});
  edge(kComplexWeak, {D::Complex64});
  edge(node(D::Complex64), {D::Complex128});
  return s;
}

// The strict lattice: weak types promote to any type of their kind, nothing else promotes.
std::array<std::vector<int>, kNodes> strict_successors() {
  std::array<std::vector<int>, kNodes> s;
  s[kIntWeak].push_back(kFloatWeak);
  s[kFloatWeak].push_back(kComplexWeak);
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType t = static_cast<DType>(d);
    if (is_integer(t)) s[kIntWeak].push_back(d);
    if (is_floating(t)) s[kFloatWeak].push_back(d);
    if (is_complex(t)) s[kComplexWeak].push_back(d);
  }
  return s;
}

std::array<NodeSet, kNodes> upper_sets(const std::array<std::vector<int>, kNodes>& succ) {
  std::array<NodeSet, kNodes> u;
  // Successors always have higher upper sets; iterate to a fixed point.
  for (int n = 0; n < kNodes; ++n) u[n].set(n);
  for (bool changed = true; changed;) {
    changed = false;
    for (int n = 0; n < kNodes; ++n)
      for (int m : succ[n]) {
        const NodeSet grown = u[n] | u[m];
        if (grown != u[n]) u[n] = grown, changed = true;
      }
  }
  return u;
}

int to_node(TypedDType t) {
  if (t.weak) {
    if (is_integer(t.dtype)) return kIntWeak;
    if (is_floating(t.dtype)) return kFloatWeak;
    if (is_complex(t.dtype)) return kComplexWeak;
  }
  return node(t.dtype);
}

TypedDType from_node(int n) {
  if (n == kIntWeak) return {default_int_dtype(), true};
  if (n == kFloatWeak) return {default_float_dtype(), true};
  if (n == kComplexWeak) return {x64_enabled() ? DType::Complex128 : DType::Complex64, true};
  return {static_cast<DType>(n)};
}

// As JAX prints the lattice's nodes in its errors: dtype names, and the weak
// categories as the Python types int and float.
std::string node_str(int n) {
  if (n == kIntWeak) return "<class 'int'>";
  if (n == kFloatWeak) return "<class 'float'>";
  if (n == kComplexWeak) return "<class 'complex'>";
  return dtype_name(static_cast<DType>(n));
}

}  // namespace

size_t itemsize(DType dt) { return kInfo[static_cast<int>(dt)].itemsize; }
const char* dtype_name(DType dt) { return kInfo[static_cast<int>(dt)].name; }
const char* dtype_short_name(DType dt) { return kInfo[static_cast<int>(dt)].short_name; }

DType dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == kInfo[i].name) return static_cast<DType>(i);
  fail<TypeError>("meshsim does not support the dtype ", name);
}

void fail_unsupported_dtype(DType dt, const char* what) {
  fail<TypeError>("this operation expects ", what, ", got ", dtype_name(dt));
}

bool x64_enabled() { return g_x64.load(); }
void set_x64_enabled(bool on) { g_x64.store(on); }
DType default_int_dtype() { return x64_enabled() ? DType::Int64 : DType::Int32; }
DType default_float_dtype() { return x64_enabled() ? DType::Float64 : DType::Float32; }

DType canonicalize_dtype(DType dt) {
  if (x64_enabled()) return dt;
  switch (dt) {
    case DType::Int64: return DType::Int32;
    case DType::UInt64: return DType::UInt32;
    case DType::Float64: return DType::Float32;
    case DType::Complex128: return DType::Complex64;
    default: return dt;
  }
}

bool strict_promotion() { return g_strict.load(); }
void set_strict_promotion(bool on) { g_strict.store(on); }

TypedDType promote_types(TypedDType a, TypedDType b) {
  static const auto standard = upper_sets(standard_successors());
  static const auto strict = upper_sets(strict_successors());
  const bool is_strict = strict_promotion();
  const auto& uppers = is_strict ? strict : standard;
  const int na = to_node(a), nb = to_node(b);
  const NodeSet common = uppers[na] & uppers[nb];
  // The least upper bound is the common bound whose own upper set is all of them.
  for (int n = 0; n < kNodes; ++n) {
    if (common.test(n) && uppers[n] == common) {
      TypedDType r = from_node(n);
      r.dtype = canonicalize_dtype(r.dtype);
      return r;
    }
  }
  const std::string nodes = "('" + node_str(na) + "', '" + node_str(nb) + "')";
  if (is_strict)
    fail<TypePromotionError>("Input dtypes ", nodes, " have no available implicit dtype promotion path when "
                             "jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the desired "
                             "output type, or set jax_numpy_dtype_promotion=standard.");
  if (is_float8(a.dtype) || is_float8(b.dtype))
    fail<TypePromotionError>("Input dtypes ", nodes, " have no available implicit dtype promotion path. To "
                             "avoid unintended promotion, 8-bit floats do not support implicit promotion. If "
                             "you'd like your inputs to be promoted to another type, you can do so explicitly "
                             "using e.g. x.astype('float32')");
  if (is_int4(a.dtype) || is_int4(b.dtype))
    fail<TypePromotionError>("Input dtypes ", nodes, " have no available implicit dtype promotion path. To "
                             "avoid unintended promotion, 1-bit, 2-bit and 4-bit integers do not support "
                             "implicit promotion. If you'd like your inputs to be promoted to another type, you "
                             "can do so explicitly using e.g. x.astype('int32')");
  fail<TypePromotionError>("Input dtypes ", nodes, " have no available implicit dtype promotion path. Try "
                           "explicitly casting inputs to the desired output type.");
}

}  // namespace meshsim
