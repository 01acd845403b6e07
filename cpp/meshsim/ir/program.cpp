#include "meshsim/ir/program.h"
#include "meshsim/ir/printing.h"


#include <optional>
#include <type_traits>

#include <algorithm>
#include <deque>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <sstream>

namespace meshsim {

Avals Program::in_avals() const {
  Avals a;
  for (int v : invars) a.push_back(avals[v]);
  return a;
}

Avals Program::out_avals() const {
  Avals a;
  for (int v : outvars) a.push_back(avals[v]);
  return a;
}

namespace {

// ---------------------------------------------------------------------------
// A pretty printer with JAX's layout algorithm (jax/_src/pretty_printer.py,
// Lindig's "strictly pretty": a group prints flat when it and what follows it
// up to the next line break fit in the width), so programs break lines where
// jaxprs do (width 80).
namespace pp {

struct Doc;
using D = std::shared_ptr<const Doc>;
struct Doc {
  enum Kind { Nil, Text, Concat, Brk, Group, Nest } kind;
  std::string text;
  std::vector<D> children;
  int n = 0;
};

D nil() { return std::make_shared<Doc>(Doc{Doc::Nil, "", {}, 0}); }
D text(std::string s) { return std::make_shared<Doc>(Doc{Doc::Text, std::move(s), {}, 0}); }
D concat(std::vector<D> xs) { return std::make_shared<Doc>(Doc{Doc::Concat, "", std::move(xs), 0}); }
D brk(std::string s = " ") { return std::make_shared<Doc>(Doc{Doc::Brk, std::move(s), {}, 0}); }
D group(D d) { return std::make_shared<Doc>(Doc{Doc::Group, "", {std::move(d)}, 0}); }
D nest(int n, D d) { return std::make_shared<Doc>(Doc{Doc::Nest, "", {std::move(d)}, n}); }
D join(const D& sep, const std::vector<D>& docs) {
  if (docs.empty()) return nil();
  if (docs.size() == 1) return docs[0];
  std::vector<D> xs{docs[0]};
  for (size_t i = 1; i < docs.size(); ++i) { xs.push_back(sep); xs.push_back(docs[i]); }
  return concat(std::move(xs));
}

enum class Mode { Flat, Break };
struct State { int indent; Mode mode; const Doc* doc; };

// Whether `doc` printed flat (every break as its text) takes at most `width` columns.
bool fits(int width, const Doc* doc) {
  std::vector<const Doc*> agenda{doc};
  while (width >= 0 && !agenda.empty()) {
    const Doc& d = *agenda.back();
    agenda.pop_back();
    switch (d.kind) {
      case Doc::Nil: break;
      case Doc::Text:
      case Doc::Brk: width -= static_cast<int>(d.text.size()); break;
      case Doc::Concat:
        for (auto it = d.children.rbegin(); it != d.children.rend(); ++it) agenda.push_back(it->get());
        break;
      case Doc::Nest:
      case Doc::Group: agenda.push_back(d.children[0].get()); break;
    }
  }
  return width >= 0;
}

std::string format(const D& doc, int width = 80) {
  std::string out;
  int k = 0;
  std::vector<State> agenda{{0, Mode::Break, doc.get()}};
  while (!agenda.empty()) {
    State s = agenda.back();
    agenda.pop_back();
    const Doc& d = *s.doc;
    switch (d.kind) {
      case Doc::Nil: break;
      case Doc::Text: out += d.text; k += static_cast<int>(d.text.size()); break;
      case Doc::Concat:
        for (auto it = d.children.rbegin(); it != d.children.rend(); ++it)
          agenda.push_back({s.indent, s.mode, it->get()});
        break;
      case Doc::Brk:
        if (s.mode == Mode::Break) {
          out += "\n" + std::string(s.indent, ' ');
          k = s.indent;
        } else {
          out += d.text;
          k += static_cast<int>(d.text.size());
        }
        break;
      case Doc::Nest: agenda.push_back({s.indent + d.n, s.mode, d.children[0].get()}); break;
      case Doc::Group: {
        // As jaxlib's printer: only the group itself, every break in it flat, must fit in the
        // rest of the line; the text after it may run past the width.
        Mode m = fits(width - k, d.children[0].get()) ? Mode::Flat : Mode::Break;
        agenda.push_back({s.indent, m, d.children[0].get()});
        break;
      }
    }
  }
  return out;
}

}  // namespace pp

// Variable names as jaxprs print them: a..z, ba..bz, ...
std::string var_name(int id) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('a' + id % 26));
    id /= 26;
  } while (id > 0);
  return s;
}

// Python's repr of a complex number: parts without a trailing ".0", and a bare
// imaginary number when the real part is +0: (1+2j), 2j, (-0-1j), (inf+nanj).
std::string python_complex_repr(double re, double im) {
  auto part = [](double v) {
    std::string s = python_float_repr(v);
    if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
    return s;
  };
  const std::string imag = part(im) + "j";
  if (re == 0 && !std::signbit(re)) return imag;
  return "(" + part(re) + (std::signbit(im) || std::isnan(im) ? "" : "+") + imag + ")";
}

// A scalar constant as a jaxpr literal: 2.0:f32[], 3:i32[], True:bool[].
std::optional<std::string> literal_text(const Tensor& t) {
  if (t.ndim() != 0) return std::nullopt;
  std::string value = dispatch_any_dtype(t.dtype(), [&](auto tag) -> std::string {
    using T = decltype(tag);
    const T x = *t.data<T>();
    if constexpr (std::is_same_v<T, bool>) return x ? "True" : "False";
    else if constexpr (is_complex_v<T>) return python_complex_repr(x.real(), x.imag());
    else if constexpr (is_int4_v<T>) return std::to_string(x.value());
    else if constexpr (std::is_floating_point_v<T>) return python_float_repr(static_cast<double>(x));
    else if constexpr (is_small_float_v<T>) return python_float_repr(static_cast<double>(float(x)));
    else return std::to_string(x);
  });
  return value + ":" + dtype_short_name(t.dtype()) + "[]";
}

// Names are given in order of first appearance and continue into nested
// programs, as JAX's JaxprPpContext does. Scalar constants print as literals
// in place of a name, as JAX inlines them.
struct Context {
  std::map<std::pair<const Program*, int>, std::string> names;
  std::map<std::pair<const Program*, int>, std::string> literals;
  int next = 0;
  // Programs made for printing only (a scatter's update_jaxpr), kept alive so
  // that no later one takes the address their names are keyed by.
  std::vector<std::shared_ptr<Program>> printed_only;
  // Sub-programs printed once before the program, by name (`let _where = { ... } in`).
  std::map<const Program*, std::string> shared;
  // Programs traced for a nested jit: JAX shows no `_` for their unread results
  // (only the printed program's own unread results are dropped).
  std::set<const Program*> traced_calls;
  std::string name(const Program& p, int v) {
    if (auto lit = literals.find({&p, v}); lit != literals.end()) return lit->second;
    auto [it, fresh] = names.try_emplace({&p, v});
    if (fresh) it->second = var_name(next++);
    return it->second;
  }
  bool is_literal(const Program& p, int v) const { return literals.count({&p, v}) > 0; }
};

pp::D pp_program(const Program& p, Context& ctx);

pp::D pp_vars(const Program& p, const std::vector<int>& vs, Context& ctx, bool shapes,
              const std::string& sep = "", const std::vector<bool>* used = nullptr) {
  std::vector<pp::D> docs;
  for (int v : vs) {
    // Results nothing reads print as `_` (JAX's DropVar) and take no name.
    std::string s = used && !(*used)[v] ? "_" : ctx.name(p, v);
    if (shapes && !ctx.is_literal(p, v)) s += ":" + p.avals[v].str_short(/*short_dtype=*/true);
    docs.push_back(pp::text(s));
  }
  return pp::nest(2, pp::group(pp::join(pp::concat({pp::text(sep), pp::group(pp::brk())}), docs)));
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// How a parameter value prints: sub-programs as jaxprs (a tuple of them one
// per line when long), axis sets as Python's frozenset, the rest as params print.
pp::D pp_param(const std::string& key, const ParamValue& v, Context& ctx) {
  if (auto* p = std::get_if<ProgramPtr>(&v); p && *p) return pp_program(**p, ctx);
  if (auto* l = std::get_if<ProgramList>(&v)) {
    std::vector<pp::D> items;
    for (const ProgramPtr& q : *l) items.push_back(pp_program(*q, ctx));
    return pp::group(pp::concat({pp::nest(2, pp::concat({pp::text("("), pp::brk(""),
                                                         pp::join(pp::brk(), items)})),
                                 pp::brk(""), pp::text(")")}));
  }
  if (key == "newly_manual_axes" || key == "manual_axes") {
    if (auto* l = std::get_if<StrList>(&v)) {
      StrList sorted = *l;
      std::sort(sorted.begin(), sorted.end());
      std::string s = "frozenset({";
      for (size_t i = 0; i < sorted.size(); ++i) s += (i ? ", " : "") + quoted(sorted[i]);
      return pp::text(s + "})");
    }
  }
  return pp::text(param_value_str(v));
}

bool is_none(const ParamValue& v) { return std::holds_alternative<std::monostate>(v); }

// The equation as JAX prints it: its params but the ones only flagging others
// (numpy_dims, shown inside the dims it flags) and an unset out_dtype, then
// whatever the primitive's print rule changes (ir/printing.h).
PrintedEquation printed(const Program& p, const Equation& e) {
  PrintedEquation view{p, e, e.prim->name, {}};
  for (const auto& [k, v] : e.params.items())
    if (k != "numpy_dims" && !(k == "out_dtype" && is_none(v))) view.params.push_back(PrintedParam{k, v, ""});
  if (e.prim->print_rule) e.prim->print_rule(view);
  std::stable_sort(view.params.begin(), view.params.end(),
                   [](const PrintedParam& a, const PrintedParam& b) { return a.key < b.key; });
  // JAX's rules for calls (pjit, custom_jvp_call, custom_vjp_call) print `name` first.
  std::stable_partition(view.params.begin(), view.params.end(),
                        [](const PrintedParam& q) { return q.key == "name"; });
  return view;
}

// The equation's sub-programs its printed form shows (a print rule may hide one, such as
// a custom_jvp_call's rule; the ones a rule makes for printing are not the equation's).
std::vector<const Program*> printed_sub_programs(const Program& p, const Equation& e) {
  std::set<const Program*> shown;
  for (const PrintedParam& q : printed(p, e).params) {
    if (auto* sub = std::get_if<ProgramPtr>(&q.value)) shown.insert(sub->get());
    if (auto* l = std::get_if<ProgramList>(&q.value))
      for (const ProgramPtr& r : *l) shown.insert(r.get());
  }
  std::vector<const Program*> out;
  for (const Program* sub : sub_programs(e))
    if (shown.count(sub)) out.push_back(sub);
  return out;
}

// Names `callee`'s variables `vars` as `p`'s `like` (JAX's suggest_same_var_names):
// each not yet named takes the name of its partner, unless that is a literal or
// already given to an earlier one.
// A result nothing reads is JAX's DropVar, whose name is `_`.
void suggest_same_names(Context& ctx, const Program& callee, const std::vector<int>& vars,
                        const Program& p, const std::vector<int>& like, const std::vector<bool>& used) {
  if (vars.size() != like.size()) return;
  std::set<int> given;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (ctx.is_literal(p, like[i]) || given.count(like[i]) || ctx.names.count({&callee, vars[i]}) ||
        ctx.is_literal(callee, vars[i]))
      continue;
    given.insert(like[i]);
    ctx.names[{&callee, vars[i]}] = used[like[i]] ? ctx.name(p, like[i]) : "_";
  }
}

pp::D pp_eqn(const Program& p, const Equation& e, Context& ctx, const std::vector<bool>& used) {
  PrintedEquation view = printed(p, e);
  // Programs made for printing (a scatter's update_jaxpr) live as long as the
  // names keyed by their address.
  for (const PrintedParam& q : view.params)
    if (auto* program = std::get_if<ProgramPtr>(&q.value); program && *program) ctx.printed_only.push_back(*program);
  if (e.prim->prints_as_call) {
    // JAX's call rule (pjit): `name` first, and the called program's variables
    // named as the operands and results they stand for, where those are
    // distinct variables (before the results are named: a result so named is named first).
    for (const std::string& key : e.prim->sub_program_params) {
      const Program& callee = *e.params.get<ProgramPtr>(key);
      if (ctx.shared.count(&callee)) continue;
      suggest_same_names(ctx, callee, callee.invars, p, e.inputs, used);
      suggest_same_names(ctx, callee, callee.outvars, p, e.outputs, used);
    }
  }
  pp::D lhs = pp_vars(p, e.outputs, ctx, /*shapes=*/true, "", &used);
  pp::D params = pp::nil();
  if (!view.params.empty()) {
    std::vector<pp::D> items;
    for (const PrintedParam& q : view.params)
      items.push_back(pp::concat({pp::text(q.key + "="), q.text.empty() ? pp_param(q.key, q.value, ctx)
                                                                        : pp::text(q.text)}));
    params = pp::group(pp::concat(
        {pp::nest(2, pp::concat({pp::text("["), pp::brk(""), pp::join(pp::brk(), items)})),
         pp::brk(""), pp::text("]")}));
  }
  std::vector<pp::D> rhs{pp::text(view.name), params,
                         pp::concat({pp::text(" "), pp_vars(p, e.inputs, ctx, false)})};
  if (e.outputs.empty()) return pp::concat(rhs);
  std::vector<pp::D> all{lhs, pp::text(" = ")};
  all.insert(all.end(), rhs.begin(), rhs.end());
  return pp::concat(all);
}

pp::D pp_program_text(const Program& p, Context& ctx);

pp::D pp_program(const Program& p, Context& ctx) {
  if (auto it = ctx.shared.find(&p); it != ctx.shared.end()) return pp::text(it->second);
  return pp_program_text(p, ctx);
}

// JAX's printer names the sub-programs used more than once, or holding more
// than 10 equations, after the equation holding them (its `name`, else
// "jaxpr", numbered when taken), in the order a breadth-first walk meets them.
void name_shared_sub_programs(const Program& top, Context& ctx, std::vector<const Program*>& order) {
  std::map<const Program*, int> uses;
  std::map<const Program*, std::string> names;
  std::vector<const Program*> met;
  std::deque<const Program*> queue{&top};
  while (!queue.empty()) {
    const Program* q = queue.front();
    queue.pop_front();
    if (!uses.count(q)) met.push_back(q);
    uses[q] += q != &top && q->eqns.size() > 10 ? 2 : 1;
    for (const Equation& e : q->eqns) {
      const std::string* name = nullptr;
      // Only a call's `name` is a param of JAX's equation (custom_jvp_call's and
      // custom_vjp_call's print rules add theirs).
      for (const auto& [key, value] : e.params.items())
        if (key == "name" && e.prim->prints_as_call) name = std::get_if<std::string>(&value);
      for (const Program* sub : printed_sub_programs(*q, e)) {
        queue.push_back(sub);
        if (name) names.try_emplace(sub, *name);
        if (e.prim->prints_as_call) ctx.traced_calls.insert(sub);
      }
    }
  }
  std::map<std::string, int> taken;
  for (const Program* q : met) {
    if (uses[q] < 2) continue;
    std::string name = names.count(q) ? names[q] : "jaxpr";
    if (name.size() > 1 && name.front() == '<' && name.back() == '>') name = name.substr(1, name.size() - 2);
    if (const int n = taken[name]++; n > 0) {
      name += std::to_string(n);
      ++taken[name];
    }
    ctx.shared[q] = name;
    order.push_back(q);
  }
}

pp::D pp_program_text(const Program& p, Context& ctx) {
  std::vector<int> named_consts;
  for (size_t i = 0; i < p.constvars.size(); ++i) {
    if (auto text = literal_text(p.consts[i])) ctx.literals[{&p, p.constvars[i]}] = *text;
    else named_consts.push_back(p.constvars[i]);
  }
  pp::D constvars = pp_vars(p, named_consts, ctx, true);
  pp::D invars = pp_vars(p, p.invars, ctx, true);
  std::vector<pp::D> eqns;
  std::vector<bool> used(p.avals.size(), ctx.traced_calls.count(&p) > 0);
  for (const Equation& e : p.eqns)
    for (int v : e.inputs) used[v] = true;
  for (int v : p.outvars) used[v] = true;
  for (const Equation& e : p.eqns) eqns.push_back(pp_eqn(p, e, ctx, used));
  pp::D body = pp::join(pp::brk("; "), eqns);
  pp::D outvars = pp::concat({pp::text("("), pp_vars(p, p.outvars, ctx, false, ","),
                              pp::text(p.outvars.size() != 1 ? ")" : ",)")});
  // The closing brace is part of the group, so it counts when the group is fitted.
  return pp::group(pp::concat(
      {pp::nest(2, pp::concat({pp::text("{ "), pp::text("lambda "), constvars, pp::text("; "),
                               invars, pp::text(". "), pp::text("let"),
                               pp::nest(2, pp::concat({pp::brk(), body})), pp::brk(),
                               pp::text("in "), outvars})),
       pp::text(" }")}));
}

}  // namespace

std::vector<const Program*> sub_programs(const Equation& e) {
  std::vector<const Program*> out;
  for (const auto& [key, value] : e.params.items()) {
    if (auto* p = std::get_if<ProgramPtr>(&value); p && *p) out.push_back(p->get());
    if (auto* l = std::get_if<ProgramList>(&value))
      for (const ProgramPtr& q : *l) out.push_back(q.get());
  }
  return out;
}

bool calls_collective(const Equation& e) {
  for (const Program* sub : sub_programs(e))
    if (holds_collective(*sub)) return true;
  return false;
}

bool holds_collective(const Program& program) {
  for (const Equation& e : program.eqns)
    if (e.prim->is_collective() || calls_collective(e)) return true;
  return false;
}

std::string Program::str() const {
  Context ctx;
  std::vector<const Program*> shared;
  name_shared_sub_programs(*this, ctx, shared);
  std::vector<pp::D> docs;
  for (const Program* q : shared)
    docs.push_back(pp::concat({pp::text("let " + ctx.shared[q] + " = "), pp_program_text(*q, ctx),
                               pp::text(" in"), pp::brk()}));
  docs.push_back(pp_program_text(*this, ctx));
  return pp::format(pp::concat(docs));
}

}  // namespace meshsim
