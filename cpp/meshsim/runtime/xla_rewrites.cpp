#include "meshsim/runtime/xla_rewrites.h"

#include <algorithm>
#include <complex>
#include <string>

#include "meshsim/kernels/dispatch.h"

namespace meshsim {
namespace {

// Elementwise primitives whose bfloat16 kernel is the float32 one rounded
// once, as each declares where it is registered (Primitive::bf16_widened_once).
bool widened_once(const Primitive& prim) { return prim.elementwise && prim.bf16_widened_once; }

// Per variable: the equation computing it, -1 for inputs and constants.
std::vector<int> producers_of(const Program& p) {
  std::vector<int> producer(p.avals.size(), -1);
  for (size_t k = 0; k < p.eqns.size(); ++k)
    for (int v : p.eqns[k].outputs) producer[v] = static_cast<int>(k);
  return producer;
}

// The float32 value a convert to float32 of a bfloat16 op's result reads.
bool reads_unrounded(const Program& p, const Equation& e, const std::vector<int>& producers) {
  if (e.prim->name != "convert_element_type" || e.inputs.size() != 1) return false;
  if (p.avals[e.outputs[0]].dtype != DType::Float32 || p.avals[e.inputs[0]].dtype != DType::BFloat16)
    return false;
  const int k = producers[e.inputs[0]];
  if (k < 0) return false;
  const Equation& op = p.eqns[k];
  if (op.outputs.size() != 1 || !widened_once(*op.prim)) return false;
  for (int v : op.inputs)
    if (p.avals[v].dtype != DType::BFloat16) return false;
  return true;
}

int const_index(const Program& p, int var) {
  auto it = std::find(p.constvars.begin(), p.constvars.end(), var);
  return it == p.constvars.end() ? -1 : static_cast<int>(it - p.constvars.begin());
}

bool divides_by_complex_constant(const Program& p, const Equation& e) {
  return e.prim->name == "div" && e.inputs.size() == 2 && is_complex(p.avals[e.outputs[0]].dtype) &&
         const_index(p, e.inputs[1]) >= 0;
}

// 1 / c element by element, as XLA folds it (std::complex division).
Tensor reciprocal_of(const Tensor& c) {
  const Tensor dense = c.contiguous();
  Tensor out = Tensor::empty(c.dtype(), c.shape());
  dispatch_complex(c.dtype(), [&](auto tag) {
    using C = decltype(tag);
    const C* from = dense.data<C>();
    C* to = out.data<C>();
    for (int64_t i = 0; i < c.size(); ++i) to[i] = C(1) / from[i];
  });
  return out;
}

}  // namespace

std::optional<Program> as_xla_compiles(const Program& program) {
  const std::vector<int> producers = producers_of(program);
  bool any = false;
  for (const Equation& e : program.eqns)
    any = any || divides_by_complex_constant(program, e) || reads_unrounded(program, e, producers);
  if (!any) return std::nullopt;

  Program p = program;  // the printed program stays as traced
  std::vector<Equation> eqns;
  eqns.reserve(p.eqns.size());
  for (const Equation& e : program.eqns) {
    if (divides_by_complex_constant(program, e)) {
      const int c = const_index(program, e.inputs[1]);
      Aval aval = program.avals[e.inputs[1]];
      const int r = p.new_var(aval);
      p.constvars.push_back(r);
      p.consts.push_back(reciprocal_of(program.consts[c]));
      eqns.push_back(Equation{&primitive("mul"), e.params, {e.inputs[0], r}, e.outputs});
      continue;
    }
    if (reads_unrounded(program, e, producers)) {
      // The op again, on its operands widened to float32, straight into the convert's result.
      const Equation& op = program.eqns[producers[e.inputs[0]]];
      std::vector<int> widened;
      for (int v : op.inputs) {
        Aval aval = program.avals[v];
        aval.dtype = DType::Float32;
        aval.weak_type = false;
        const int w = p.new_var(aval);
        Params params = e.params;
        params.set("weak_type", false);
        eqns.push_back(Equation{e.prim, params, {v}, {w}});
        widened.push_back(w);
      }
      eqns.push_back(Equation{op.prim, op.params, widened, e.outputs});
      continue;
    }
    eqns.push_back(e);
  }
  p.eqns = std::move(eqns);
  return p;
}

namespace {

// A reshape by new sizes alone (no dimension order, no sharding of its own).
bool plain_reshape(const Equation& e) {
  return e.prim->name == "reshape" && e.inputs.size() == 1 && e.outputs.size() == 1 &&
         (!e.params.has("dimensions") || e.params.is_none("dimensions")) &&
         (!e.params.has("sharding") || e.params.is_none("sharding"));
}

// Whether a reshape from `a` to `b` only splits single dims into several or
// merges several into one (each group of dims with equal products has one dim
// on one side), the regroupings propagation models (Shardy's reshape rule
// decomposes the others into common factors, which it does not).
bool splits_or_merges(const Shape& a, const Shape& b) {
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && a[i] == 1) { ++i; continue; }
    if (j < b.size() && b[j] == 1) { ++j; continue; }
    if (i == a.size() || j == b.size()) return false;
    int64_t pa = a[i++], pb = b[j++];
    size_t na = 1, nb = 1;
    while (pa != pb) {
      if (pa < pb) {
        if (i == a.size()) return false;
        pa *= a[i++], ++na;
      } else {
        if (j == b.size()) return false;
        pb *= b[j++], ++nb;
      }
    }
    if (na > 1 && nb > 1) return false;
  }
  return true;
}

}  // namespace

std::optional<Program> with_reshapes_folded(const Program& program) {
  std::vector<int> producer = producers_of(program);
  Program p = program;
  bool folded = false;
  for (Equation& e : p.eqns) {
    if (!plain_reshape(e)) continue;
    const int k = producer[e.inputs[0]];
    if (k < 0 || !plain_reshape(p.eqns[k])) continue;
    if (!splits_or_merges(p.avals[p.eqns[k].inputs[0]].shape, p.avals[e.outputs[0]].shape)) continue;
    e.inputs[0] = p.eqns[k].inputs[0];  // already folded onto its own first operand
    folded = true;
  }
  if (!folded) return std::nullopt;
  // Reshapes nothing reads any more go, last first (a chain's middle ones too).
  std::vector<int> reads(p.avals.size(), 0);
  for (const Equation& e : p.eqns)
    for (int v : e.inputs) ++reads[v];
  for (int v : p.outvars) ++reads[v];
  std::vector<bool> dropped(p.eqns.size(), false);
  for (size_t k = p.eqns.size(); k-- > 0;) {
    const Equation& e = p.eqns[k];
    if (!plain_reshape(e) || reads[e.outputs[0]] > 0) continue;
    dropped[k] = true;
    --reads[e.inputs[0]];
  }
  std::vector<Equation> eqns;
  for (size_t k = 0; k < p.eqns.size(); ++k)
    if (!dropped[k]) eqns.push_back(std::move(p.eqns[k]));
  p.eqns = std::move(eqns);
  return p;
}

}  // namespace meshsim
