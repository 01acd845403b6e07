#include "meshsim/runtime/xla_rewrites.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "meshsim/kernels/cast.h"

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

// Elementwise equations and layout moves whose results nothing reads any more are not computed.
void drop_unread(Program& p) {
  std::vector<int> read(p.avals.size(), 0);
  for (int v : p.outvars) ++read[v];
  for (auto e = p.eqns.rbegin(); e != p.eqns.rend(); ++e) {
    const bool dead = (e->prim->elementwise || moves_elements(p, *e)) && e->outputs.size() == 1 && !read[e->outputs[0]];
    if (dead) e->prim = nullptr;
    else for (int v : e->inputs) ++read[v];
  }
  p.eqns.erase(std::remove_if(p.eqns.begin(), p.eqns.end(), [](const Equation& e) { return !e.prim; }), p.eqns.end());
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
        // A factor broadcast by the product itself (a size-1 dim) is not moved with it.
        if (!product.moves.empty())
          for (int factor : {product.a, product.b}) {
            const Shape& s = p_.avals[factor].shape;
            if (!s.empty() && s != product.shape) return std::nullopt;
          }
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
  p.eqns = std::move(eqns);
  drop_unread(p);  // the contracted products
  return p;
}

// ---- constants regrouped ----

// Which constant an operand of a float product or sum is, as XLA's algebraic
// simplifier matches it: a constant of the operation's shape, or a scalar
// constant broadcast to it (a 0-d constant beside a shaped operand, or
// broadcast_in_dim of one). Its rules pair constants of one kind only.
struct Constant {
  Tensor value;
  bool broadcast_scalar = false;
};

// A product or sum of a non-constant value and a constant: `a` (op) `c`, with
// a quotient read as a product by the constant's reciprocal and a difference
// as a sum with the constant negated, except `c - a` (`negated`).
struct ConstantTerm {
  int a = -1;
  Constant c;
  bool negated = false;
};

// XLA's algebraic simplifier regroups float16/float32/float64 products and
// sums with constants so that the constants fold into one:
//   (A * C1) * C2 => A * (C1 * C2)      (A + C1) + C2 => A + (C1 + C2)
//   (A * C) * broadcast(B) => A * broadcast(B * C)     (C1 - A) + C2 => (C1 + C2) - A
// after reading A / C as A * (1 / C), A / broadcast(B) as A * broadcast(1 / B)
// and A - C as A + (-C), either operand of a product or sum first; a quotient
// left over is computed as that product too (which a sum reading it then
// contracts), except by a broadcast something else reads as well (XLA shares
// the broadcast and divides). Each equation is matched against the equations
// already rewritten (XLA visits operands first): ((A * C1) * C2) * C3 folds
// all three constants. A sum with a non-constant broadcast and C - (A + C1)
// stay as they are. bfloat16 is widened to float32 before, and the
// conversions between stand in the way. Not modelled: (A / B) / C =>
// A / (B * C) and A / (B / C) => (A * C) / B.
class Regrouping {
 public:
  explicit Regrouping(const Program& traced)
      : p_(traced), mul_(primitive("mul")), div_(primitive("div")), add_(primitive("add")),
        sub_(primitive("sub")), neg_(primitive("neg")), broadcast_(primitive("broadcast_in_dim")) {
    producer_ = producers_of(p_);
    for (const Equation& e : traced.eqns)
      for (int v : e.inputs) ++broadcast_reads_[broadcast_key(e, v)];
    producer_.assign(p_.avals.size(), -1);
    p_.eqns.clear();
  }

  // Appends `e`, or what XLA computes in its place; whether it regrouped.
  bool append(const Equation& e) {
    const bool regrouped = e.outputs.size() == 1 && e.inputs.size() == 2 &&
                           regroups(p_.avals[e.outputs[0]].dtype) && (product(e) || sum(e) || quotient(e));
    if (!regrouped) push(e);
    return regrouped;
  }

  Program take() { return std::move(p_); }

 private:
  static bool regroups(DType dt) { return dt == DType::Float16 || dt == DType::Float32 || dt == DType::Float64; }

  void push(Equation e) {
    for (int v : e.outputs) producer_[v] = static_cast<int>(p_.eqns.size());
    p_.eqns.push_back(std::move(e));
  }
  int emit(const Primitive& prim, Params params, std::vector<int> inputs, Aval aval) {
    const int v = p_.new_var(std::move(aval));
    producer_.push_back(-1);
    push(Equation{&prim, std::move(params), std::move(inputs), {v}});
    return v;
  }
  const Equation* producer(int v) const { return producer_[v] < 0 ? nullptr : &p_.eqns[producer_[v]]; }

  // `v` as a constant operand of an operation of `shape`.
  std::optional<Constant> constant(int v, const Shape& shape) const {
    if (const int c = const_index(p_, v); c >= 0)
      return Constant{p_.consts[c], p_.consts[c].ndim() == 0 && !shape.empty()};
    const Equation* e = producer(v);
    if (e && e->prim == &broadcast_ && p_.avals[e->inputs[0]].shape.empty())
      if (const int c = const_index(p_, e->inputs[0]); c >= 0) return Constant{p_.consts[c], true};
    return std::nullopt;
  }

  // f(x, y) of two constants of one kind, evaluated by `prim`'s kernel as XLA folds them.
  Constant folded(const Primitive& prim, const Constant& x, const Constant& y) const {
    const Tensor& shaped = x.value.ndim() ? x.value : y.value;
    const Avals out{Aval{shaped.shape(), x.value.dtype()}};
    return Constant{prim.kernel(Tensors{x.value, y.value}, Params{}, out)[0], x.broadcast_scalar};
  }
  Constant reciprocal(const Constant& x) const { return folded(div_, Constant{one(x.value.dtype())}, x); }
  Constant negated(const Constant& x) const {
    const Avals out{Aval{x.value.shape(), x.value.dtype()}};
    return Constant{neg_.kernel(Tensors{x.value}, Params{}, out)[0], x.broadcast_scalar};
  }
  static Tensor one(DType dtype) { return cast(Tensor::scalar(1.0), dtype); }
  int constant_var(const Constant& c) {
    const int v = p_.new_var(Aval{c.value.shape(), c.value.dtype()});
    producer_.push_back(-1);
    p_.constvars.push_back(v);
    p_.consts.push_back(c.value);
    return v;
  }

  // `v` as a constant term of `family` (mul_: products and quotients; add_: sums and differences).
  std::optional<ConstantTerm> term(int v, const Primitive& family) const {
    const Equation* e = producer(v);
    if (!e || e->inputs.size() != 2 || e->outputs.size() != 1) return std::nullopt;
    const Shape& shape = p_.avals[v].shape;
    const bool products = &family == &mul_;
    const Primitive& commuting = products ? mul_ : add_;
    const Primitive& inverse = products ? div_ : sub_;
    for (int i = 0; i < 2; ++i) {
      const int a = e->inputs[1 - i];
      std::optional<Constant> c = constant(e->inputs[i], shape);
      // A value broadcast implicitly (size-1 dims) is a broadcast in XLA's program: the
      // regrouped product would have to broadcast it again, so it is left as it is.
      if (!c || constant(a, shape) || p_.avals[a].shape != shape) continue;
      if (e->prim == &commuting) return ConstantTerm{a, *c};
      if (e->prim == &inverse && i == 1) return ConstantTerm{a, products ? reciprocal(*c) : negated(*c)};
      if (e->prim == &sub_ && !products && i == 0) return ConstantTerm{a, *c, /*negated=*/true};
    }
    return std::nullopt;
  }

  // A non-constant value broadcast to an operation of `shape`: the broadcast
  // equation (null for a 0-d value beside shaped operands) and its operand.
  std::optional<std::pair<const Equation*, int>> broadcast_of(int v, const Shape& shape) const {
    if (constant(v, shape)) return std::nullopt;
    if (p_.avals[v].shape.empty() && !shape.empty()) return std::pair<const Equation*, int>{nullptr, v};
    // A value whose size-1 dims the operation broadcasts (JAX's lax does so implicitly) is a
    // broadcast of it in XLA's program, read as the value itself here.
    if (p_.avals[v].shape.size() == shape.size() && p_.avals[v].shape != shape)
      return std::pair<const Equation*, int>{nullptr, v};
    const Equation* e = producer(v);
    // A broadcast_in_dim adding only size-1 dims is a reshape to XLA, which divides by it.
    if (e && e->prim == &broadcast_ && e->inputs.size() == 1 && !constant(e->inputs[0], p_.avals[e->inputs[0]].shape) &&
        num_elements(p_.avals[e->inputs[0]].shape) < num_elements(p_.avals[v].shape))
      return std::pair<const Equation*, int>{e, e->inputs[0]};
    return std::nullopt;
  }

  // The broadcast `reader` reads as its operand `v`, as XLA's common
  // subexpression elimination identifies it: a 0-d value beside a shaped
  // result by the result's shape, a broadcast_in_dim's result by its operand
  // and params. Empty when `v` is read as it is.
  std::string broadcast_key(const Equation& reader, int v) const {
    const Shape& shape = p_.avals[reader.outputs.empty() ? v : reader.outputs[0]].shape;
    if (reader.prim->elementwise && p_.avals[v].shape.empty() && !shape.empty())
      return std::to_string(v) + " to " + p_.avals[reader.outputs[0]].str();
    const Equation* e = producer(v);
    if (e && e->prim == &broadcast_ && e->inputs.size() == 1)
      return std::to_string(e->inputs[0]) + " by " + e->params.str() + " to " + p_.avals[v].str();
    return {};
  }

  // The divisor of quotient `e` as XLA reads it, a product by its reciprocal,
  // when it is a constant or a broadcast nothing else reads (XLA divides by a
  // broadcast it shares).
  bool divides_by_reciprocal(const Equation& e) const {
    if (e.prim != &div_) return false;
    if (constant(e.inputs[1], p_.avals[e.outputs[0]].shape)) return true;
    const std::string key = broadcast_key(e, e.inputs[1]);
    return !key.empty() && broadcast_of(e.inputs[1], p_.avals[e.outputs[0]].shape) && broadcast_reads_.at(key) == 1;
  }

  // A / C => A * (1 / C), A / broadcast(B) => A * broadcast(1 / B): the
  // product is contracted into a sum reading it.
  bool quotient(const Equation& e) {
    if (!divides_by_reciprocal(e)) return false;
    const Shape& shape = p_.avals[e.outputs[0]].shape;
    if (std::optional<Constant> c = constant(e.inputs[1], shape)) {
      push(Equation{&mul_, Params{}, {e.inputs[0], constant_var(reciprocal(*c))}, e.outputs});
      return true;
    }
    push(Equation{&mul_, Params{}, {e.inputs[0], rebroadcast(e.inputs[1], shape, true, nullptr)}, e.outputs});
    return true;
  }

  // broadcast(f(B)) for `v` = broadcast(B) read by an operation of `shape`:
  // f(B) = 1 / B if `reciprocal_of`, B otherwise, times the constant `c` if given.
  int rebroadcast(int v, const Shape& shape, bool reciprocal_of, const Constant* c) {
    auto [broadcast, b] = *broadcast_of(v, shape);
    const std::optional<Params> params = broadcast ? std::optional<Params>(broadcast->params) : std::nullopt;
    const Aval aval = p_.avals[b];
    if (reciprocal_of) b = emit(div_, Params{}, {constant_var(Constant{one(aval.dtype)}), b}, aval);
    if (c) b = emit(mul_, Params{}, {b, constant_var(*c)}, aval);
    return params ? emit(broadcast_, *params, {b}, p_.avals[v]) : b;
  }

  bool product(const Equation& e) {
    if (e.prim != &mul_ && e.prim != &div_) return false;
    const Aval& out = p_.avals[e.outputs[0]];
    for (int i = 0; i < 2; ++i) {
      if (e.prim == &div_ && i == 0) continue;  // the divisor is the second operand
      std::optional<ConstantTerm> inner = term(e.inputs[1 - i], mul_);
      if (!inner) continue;
      if (std::optional<Constant> c = constant(e.inputs[i], out.shape)) {
        if (c->broadcast_scalar != inner->c.broadcast_scalar) continue;
        if (e.prim == &div_) c = reciprocal(*c);
        push(Equation{&mul_, Params{}, {inner->a, constant_var(folded(mul_, inner->c, *c))}, e.outputs});
        return true;
      }
      if (!broadcast_of(e.inputs[i], out.shape) || !inner->c.broadcast_scalar) continue;
      if (e.prim == &div_ && !divides_by_reciprocal(e)) continue;
      const int factor = rebroadcast(e.inputs[i], out.shape, e.prim == &div_, &inner->c);
      push(Equation{&mul_, Params{}, {inner->a, factor}, e.outputs});
      return true;
    }
    return false;
  }

  bool sum(const Equation& e) {
    if (e.prim != &add_ && e.prim != &sub_) return false;
    const Shape& shape = p_.avals[e.outputs[0]].shape;
    for (int i = 0; i < 2; ++i) {
      if (e.prim == &sub_ && i == 0) continue;  // C - (A + C1) is not regrouped
      std::optional<ConstantTerm> inner = term(e.inputs[1 - i], add_);
      std::optional<Constant> c = constant(e.inputs[i], shape);
      if (!inner || !c || c->broadcast_scalar != inner->c.broadcast_scalar) continue;
      if (e.prim == &sub_) c = negated(*c);
      const int k = constant_var(folded(add_, inner->c, *c));
      push(inner->negated ? Equation{&sub_, Params{}, {k, inner->a}, e.outputs}
                          : Equation{&add_, Params{}, {inner->a, k}, e.outputs});
      return true;
    }
    return false;
  }

  Program p_;
  std::vector<int> producer_;  // per variable: its equation in p_.eqns, -1 for inputs and constants
  std::map<std::string, int> broadcast_reads_;  // per broadcast (broadcast_key): its readers in the traced program
  const Primitive &mul_, &div_, &add_, &sub_, &neg_, &broadcast_;
};

// The program with its constants regrouped (Regrouping); nullopt when none is.
std::optional<Program> with_constants_regrouped(const Program& program) {
  Regrouping regrouping(program);
  bool any = false;
  for (const Equation& e : program.eqns) any = regrouping.append(e) || any;
  if (!any) return std::nullopt;
  Program p = regrouping.take();
  drop_unread(p);
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
  std::optional<Program> regrouped = with_constants_regrouped(program);
  std::optional<Program> simple = simplified(regrouped ? *regrouped : program);
  if (!simple) simple = std::move(regrouped);
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
