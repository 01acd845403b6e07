#include "meshsim/runtime/xla_rewrites.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

namespace meshsim {
namespace {

// Per variable: the equation computing it, -1 for inputs and constants.
std::vector<int> producers_of(const Program& p) {
  std::vector<int> producer(p.avals.size(), -1);
  for (size_t k = 0; k < p.eqns.size(); ++k)
    for (int v : p.eqns[k].outputs) producer[v] = static_cast<int>(k);
  return producer;
}

// ---- products contracted into fused multiply-adds ----

bool is_wide_float(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }

// A product of its operands, or of its one operand by itself (Primitive::fma_product).
bool multiplies(const Equation& e) { return e.prim->fma_product && e.prim->fma_product(e.params); }

// Per variable: the one XLA's common-subexpression elimination keeps in its
// place, itself unless an earlier elementwise equation computes the same
// function of the same values (commutative operands in either order).
std::vector<int> cse_kept(const Program& p) {
  std::vector<int> kept(p.avals.size());
  std::iota(kept.begin(), kept.end(), 0);
  std::map<std::string, int> seen;
  for (const Equation& e : p.eqns) {
    if (!e.prim->elementwise || e.outputs.size() != 1) continue;
    std::vector<int> in;
    for (int v : e.inputs) in.push_back(kept[v]);
    std::string name = e.prim->name + "|" + e.params.str();
    if (multiplies(e)) {  // x * x and x squared are one product
      name = "product|";
      in = {in[0], in.back()};
    }
    if (multiplies(e) || e.prim->commutative) std::sort(in.begin(), in.end());
    std::string key = name;
    for (int v : in) key += " " + std::to_string(v);
    auto [it, fresh] = seen.emplace(key, e.outputs[0]);
    if (!fresh) kept[e.outputs[0]] = it->second;
  }
  return kept;
}

// Layout changes XLA's loop fusion computes inside the loop of their reader
// (Primitive::moves_elements), so a product read through them is in the
// sum's loop: one operand, no more elements out than in (a broadcast
// repeating the product's elements is not).
bool moves_elements(const Program& p, const Equation& e) {
  if (!e.prim->moves_elements || e.inputs.size() != 1 || e.outputs.size() != 1) return false;
  return num_elements(p.avals[e.outputs[0]].shape) <= num_elements(p.avals[e.inputs[0]].shape);
}

// A product a * b of `shape`, read through `moves` (in order) by a sum.
struct Product {
  int a = -1, b = -1;
  Shape shape;
  std::vector<const Equation*> moves;
};

// Which products LLVM contracts with the sums reading them in XLA's CPU
// code. A float32/float64 product (mul, square, integer_pow y=2) and an add
// or sub in one fused loop become one fused multiply-add when the product
// has no other use there: no other reader after dead code and common
// subexpressions are eliminated, and not stored as a result of the program.
// Reshapes, transposes, slices and reversals between them are computed in
// the sum's loop and do not stand in the way. Narrow floats are not
// contracted: their sum reads the product rounded to the format. When both
// operands of a sum qualify, the first one is contracted.
class Contraction {
 public:
  explicit Contraction(const Program& p) : p_(p), producers_(producers_of(p)), kept_(cse_kept(p)) {
    // Readers among the equations XLA keeps: live ones (dead code is
    // eliminated first), and not the duplicates CSE removes.
    readers_.assign(p.avals.size(), 0);
    std::vector<char> live(p.avals.size(), 0);
    for (int v : p.outvars) {
      live[v] = 1;
      readers_[kept_[v]] += 2;  // stored as a result: another use of the value
    }
    for (auto e = p.eqns.rbegin(); e != p.eqns.rend(); ++e) {
      bool needed = e->prim->has_effects || !e->prim->elementwise;
      for (int v : e->outputs) needed = needed || live[v];
      if (!needed) continue;
      for (int v : e->inputs) live[v] = 1;
      const bool duplicate = e->prim->elementwise && e->outputs.size() == 1 && kept_[e->outputs[0]] != e->outputs[0];
      if (!duplicate)
        for (int v : e->inputs) ++readers_[kept_[v]];
    }
  }

  // The product sum `e` contracts: its operand position, or -1.
  int contracted_operand(const Equation& e) const {
    if (!e.prim->fma_sum || e.outputs.size() != 1 || e.inputs.size() != 2) return -1;
    const Aval& sum = p_.avals[e.outputs[0]];
    if (!is_wide_float(sum.dtype)) return -1;
    for (int i = 0; i < 2; ++i)
      if (p_.avals[e.inputs[i]].shape == sum.shape && product_of(e.inputs[i])) return i;
    return -1;
  }

  // The product computing `v`, if it can be contracted into the sum reading `v`.
  std::optional<Product> product_of(int v) const {
    Product product;
    for (int k = producers_[v];; k = producers_[v]) {
      if (k < 0 || readers_[kept_[v]] != 1) return std::nullopt;
      const Equation& e = p_.eqns[k];
      if (multiplies(e)) {
        product.a = e.inputs[0];
        product.b = e.inputs.back();
        product.shape = p_.avals[e.outputs[0]].shape;
        std::reverse(product.moves.begin(), product.moves.end());
        return product;
      }
      if (!moves_elements(p_, e)) return std::nullopt;
      product.moves.push_back(&e);
      v = e.inputs[0];
    }
  }

 private:
  const Program& p_;
  std::vector<int> producers_, kept_, readers_;
};

// The program with its contractible products and sums computed as fused
// multiply-adds (a - b and c - a * b by negating an operand first, exactly);
// nullopt when none is.
std::optional<Program> with_products_contracted(const Program& program) {
  const Contraction contraction(program);
  bool any = false;
  for (const Equation& e : program.eqns) any = any || contraction.contracted_operand(e) >= 0;
  if (!any) return std::nullopt;

  Program p = program;
  std::vector<Equation> eqns;
  eqns.reserve(p.eqns.size());
  const Primitive& fma = primitive("fused_multiply_add");
  auto negated = [&](int v) {
    const int n = p.new_var(p.avals[v]);
    eqns.push_back(Equation{&primitive("neg"), Params{}, {v}, {n}});
    return n;
  };
  for (const Equation& e : program.eqns) {
    const int i = contraction.contracted_operand(e);
    if (i < 0) {
      eqns.push_back(e);
      continue;
    }
    const Product product = *contraction.product_of(e.inputs[i]);
    // Each factor through the moves between the product and the sum (a scalar beside the product stays).
    auto moved = [&](int factor) {
      if (p.avals[factor].shape.empty() && !product.shape.empty()) return factor;
      for (const Equation* move : product.moves) {
        Aval aval = p.avals[move->outputs[0]];
        aval.weak_type = p.avals[factor].weak_type;
        const int w = p.new_var(aval);
        eqns.push_back(Equation{move->prim, move->params, {factor}, {w}});
        factor = w;
      }
      return factor;
    };
    int a = moved(product.a), b = moved(product.b);
    int c = e.inputs[1 - i];
    if (e.prim->fma_sum < 0) {
      if (i == 0) c = negated(c);  // a * b - c
      else a = negated(a);         // c - a * b
    }
    eqns.push_back(Equation{&fma, Params{}, {a, b, c}, e.outputs});
  }
  // Products read by nothing any more are not computed.
  std::vector<int> read(p.avals.size(), 0);
  for (int v : p.outvars) ++read[v];
  for (auto e = eqns.rbegin(); e != eqns.rend(); ++e) {
    const bool dead = (e->prim->elementwise || moves_elements(p, *e)) && e->outputs.size() == 1 && !read[e->outputs[0]];
    if (dead) e->prim = nullptr;
    else for (int v : e->inputs) ++read[v];
  }
  eqns.erase(std::remove_if(eqns.begin(), eqns.end(), [](const Equation& e) { return !e.prim; }), eqns.end());
  p.eqns = std::move(eqns);
  return p;
}

// The algebraic simplifier's changes that show in the bits, as each primitive
// declares them (Primitive::xla_rewrite; see the header).
std::optional<Program> simplified(const Program& program) {
  const std::vector<int> producers = producers_of(program);
  auto rewrites = [&](const Equation& e, Program* compiled) {
    return e.prim->xla_rewrite && e.prim->xla_rewrite(XlaRewriteSite{program, e, producers, compiled});
  };
  if (std::none_of(program.eqns.begin(), program.eqns.end(), [&](const Equation& e) { return rewrites(e, nullptr); }))
    return std::nullopt;

  Program p = program;  // the printed program stays as traced
  p.eqns.clear();
  for (const Equation& e : program.eqns)
    if (!rewrites(e, &p)) p.eqns.push_back(e);
  return p;
}

}  // namespace

int const_index(const Program& p, int var) {
  auto it = std::find(p.constvars.begin(), p.constvars.end(), var);
  return it == p.constvars.end() ? -1 : static_cast<int>(it - p.constvars.begin());
}

std::optional<Program> as_xla_compiles(const Program& program) {
  std::optional<Program> simple = simplified(program);
  std::optional<Program> contracted = with_products_contracted(simple ? *simple : program);
  return contracted ? contracted : simple;
}

namespace {

// A reshape by new sizes alone (no dimension order, no sharding of its own):
// a primitive that regroups its operand's dims (Primitive::regroups_dims), so
// two in a row compute what one from the first's operand does.
bool plain_reshape(const Equation& e) {
  return e.prim->regroups_dims && e.inputs.size() == 1 && e.outputs.size() == 1 &&
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
