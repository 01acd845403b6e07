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
}};

std::atomic<bool> g_x64{false};

// Nodes of JAX's promotion lattice (jax/_src/dtypes.py), with the two weak
// categories i* and f* that Python scalars occupy.
enum Node { B1, U8, U16, U32, U64, IW, I8, I16, I32, I64, FW, F32, F64, kNodes };
using NodeSet = std::bitset<kNodes>;

// Direct successors of each node.
const std::array<std::vector<Node>, kNodes> kSuccessors = {{
    /*B1*/ {IW}, /*U8*/ {I16, U16}, /*U16*/ {I32, U32}, /*U32*/ {I64, U64}, /*U64*/ {FW},
    /*IW*/ {U8, I8}, /*I8*/ {I16}, /*I16*/ {I32}, /*I32*/ {I64}, /*I64*/ {FW},
    /*FW*/ {F32}, /*F32*/ {F64}, /*F64*/ {},
}};

NodeSet upper_set(Node n) {
  NodeSet s;
  s.set(n);
  for (Node m : kSuccessors[n]) s |= upper_set(m);
  return s;
}

Node to_node(TypedDType t) {
  if (t.weak) {
    if (is_integer(t.dtype)) return IW;
    if (is_floating(t.dtype)) return FW;
  }
  switch (t.dtype) {
    case DType::Bool: return B1;
    case DType::Int8: return I8;
    case DType::Int16: return I16;
    case DType::Int32: return I32;
    case DType::Int64: return I64;
    case DType::UInt8: return U8;
    case DType::UInt16: return U16;
    case DType::UInt32: return U32;
    case DType::UInt64: return U64;
    case DType::Float32: return F32;
    case DType::Float64: return F64;
  }
  return F32;
}

TypedDType from_node(Node n) {
  switch (n) {
    case B1: return {DType::Bool};
    case U8: return {DType::UInt8};
    case U16: return {DType::UInt16};
    case U32: return {DType::UInt32};
    case U64: return {DType::UInt64};
    case IW: return {default_int_dtype(), true};
    case I8: return {DType::Int8};
    case I16: return {DType::Int16};
    case I32: return {DType::Int32};
    case I64: return {DType::Int64};
    case FW: return {default_float_dtype(), true};
    case F32: return {DType::Float32};
    case F64: return {DType::Float64};
    default: return {DType::Float32};
  }
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
    default: return dt;
  }
}

TypedDType promote_types(TypedDType a, TypedDType b) {
  static const auto uppers = [] {
    std::array<NodeSet, kNodes> u;
    for (int n = 0; n < kNodes; ++n) u[n] = upper_set(static_cast<Node>(n));
    return u;
  }();
  NodeSet common = uppers[to_node(a)] & uppers[to_node(b)];
  // The least upper bound is the common bound whose own upper set is all of them.
  for (int n = 0; n < kNodes; ++n) {
    if (common.test(n) && uppers[n] == common) {
      TypedDType r = from_node(static_cast<Node>(n));
      r.dtype = canonicalize_dtype(r.dtype);
      return r;
    }
  }
  fail<TypeError>("no common type for ", dtype_name(a.dtype), " and ", dtype_name(b.dtype));
}

}  // namespace meshsim
