// The batching rules of cond, while and scan (JAX's vmap of control flow):
// one batched control-flow equation, or for a cond whose index differs per
// example, every branch computed and the results selected.
#include <algorithm>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/trace.h"
#include "meshsim/primitives/control_flow.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/transforms/vjp.h"

namespace meshsim {
namespace {

// `pred` broadcast along `like`'s trailing dims when its rank is lower (it
// holds `like`'s leading dims).
Value leading_broadcast(const Value& pred, const Value& like) {
  const int64_t rank = aval_of(pred).ndim();
  const Shape& shape = aval_of(like).shape;
  if (rank == static_cast<int64_t>(shape.size())) return pred;
  IntList dims;
  for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  return ops::broadcast_in_dim(pred, shape, dims);
}

std::vector<bool> any_of_each(const std::vector<std::vector<bool>>& lists, size_t n) {
  std::vector<bool> r(n, false);
  for (const std::vector<bool>& l : lists)
    for (size_t i = 0; i < n; ++i) r[i] = r[i] || l[i];
  return r;
}

// A cond whose index differs per example computes every branch on all
// examples and selects each result by the index, as JAX does; each branch sees
// its operands through a select against their stop_gradient copies, so
// reverse-mode gradients flow only into the branch an example takes.
Batched cond_as_select(const BatchArgs& a, const ProgramList& branches) {
  Values in;
  for (size_t i = 0; i < a.in.size(); ++i) in.push_back(batch_at(a.in[i], a.dims[i], 0, a.size));
  const Value& index = in[0];
  const std::vector<bool> all(in.size() - 1, true);
  std::vector<Values> outs;  // [branch][output]
  for (size_t b = 0; b < branches.size(); ++b) {
    const ProgramPtr batched = batch_program(*branches[b], all, a.size);
    const Value taken = ops::eq(index, ops::full({}, DType::Int32, static_cast<double>(b)));
    Values operands;
    for (size_t i = 1; i < in.size(); ++i)
      operands.push_back(ops::select(leading_broadcast(taken, in[i]), in[i], ops::bind1("stop_gradient", {in[i]})));
    outs.push_back(eval_program(*batched, operands));
  }
  Batched r;
  for (size_t j = 0; j < outs[0].size(); ++j) {
    Values cases;
    for (const Values& o : outs) cases.push_back(o[j]);
    r.out.push_back(ops::select_n(leading_broadcast(index, cases[0]), cases));
    r.dims.push_back(0);
  }
  return r;
}

}  // namespace

// With an index the same for every example, one cond over the batched
// operands (moved to dimension 0); a result is batched when some branch makes
// it so.
Batched cond_batch(const BatchArgs& a) {
  const ProgramList& branches = a.params.get<ProgramList>("branches");
  if (a.dims[0] != kNotBatched) return cond_as_select(a, branches);
  Values in{a.in[0]};
  BatchDims op_dims;
  for (size_t i = 1; i < a.in.size(); ++i) {
    const bool batched = a.dims[i] != kNotBatched;
    in.push_back(batched ? batch_at(a.in[i], a.dims[i], 0, a.size) : a.in[i]);
    op_dims.push_back(batched ? 0 : kNotBatched);
  }
  const size_t num_out = branches[0]->outvars.size();
  std::vector<std::vector<bool>> each;
  for (const ProgramPtr& b : branches)
    each.push_back(batch_program(*b, op_dims, a.size, std::vector<bool>(num_out, false)).out_batched);
  const std::vector<bool> out_batched = any_of_each(each, num_out);
  ProgramList batched;
  for (const ProgramPtr& b : branches) batched.push_back(batch_program(*b, op_dims, a.size, out_batched).program);
  Params params = a.params;
  params.set("branches", batched);
  Batched r{meshsim::bind(a.prim, in, params), {}};
  for (bool b : out_batched) r.dims.push_back(b ? 0 : kNotBatched);
  return r;
}

// As JAX batches a while: a carry is batched when its initial value is or the
// body makes it so (a fixpoint); when the predicate then depends on the
// example, every carry is batched and the loop runs until no example's
// predicate holds, each example keeping its carry once its own predicate is
// false (the while's runner selects by the batched predicate). Constants keep
// their batch dimension; batched carries hold it at 0.
Batched while_batch(const BatchArgs& a) {
  const WhileParams w(a.params);
  const size_t first = w.cond_nconsts + w.body_nconsts, num_carry = a.in.size() - first;
  const BatchDims cconst_dims(a.dims.begin(), a.dims.begin() + w.cond_nconsts);
  const BatchDims bconst_dims(a.dims.begin() + w.cond_nconsts, a.dims.begin() + first);
  std::vector<bool> carry_batched;
  for (size_t j = 0; j < num_carry; ++j) carry_batched.push_back(a.dims[first + j] != kNotBatched);
  const auto with_carries = [&](BatchDims dims, const std::vector<bool>& carries) {
    for (bool b : carries) dims.push_back(b ? 0 : kNotBatched);
    return dims;
  };
  for (size_t round = 0; round <= num_carry; ++round) {
    const std::vector<bool> out =
        batch_program(*w.body, with_carries(bconst_dims, carry_batched), a.size, carry_batched).out_batched;
    if (out == carry_batched) break;
    carry_batched = any_of_each({carry_batched, out}, num_carry);
  }
  const bool pred_batched =
      batch_program(*w.cond, with_carries(cconst_dims, carry_batched), a.size, {false}).out_batched[0];
  if (pred_batched) carry_batched.assign(num_carry, true);
  const ProgramPtr body =
      batch_program(*w.body, with_carries(bconst_dims, carry_batched), a.size, carry_batched).program;
  const ProgramPtr cond =
      batch_program(*w.cond, with_carries(cconst_dims, carry_batched), a.size, {pred_batched}).program;
  Values in(a.in.begin(), a.in.begin() + first);
  Batched r;
  for (size_t j = 0; j < num_carry; ++j) {
    in.push_back(carry_batched[j] ? batch_at(a.in[first + j], a.dims[first + j], 0, a.size) : a.in[first + j]);
    r.dims.push_back(carry_batched[j] ? 0 : kNotBatched);
  }
  Params params = a.params;
  params.set("body_jaxpr", body);
  params.set("cond_jaxpr", cond);
  r.out = meshsim::bind(a.prim, in, params);
  return r;
}

// vmap of a scan is one scan over batched values, as JAX batches it: batched
// constants and carries hold the batch at dimension 0 and batched xs at
// dimension 1 (0 is the scanned one), so each row x[i] is batched at 0 in
// the body; batched ys come out stacked at 1. A carry is batched when its
// initial value is or the body makes it so (the fixpoint of while_batch); a
// carry or ys the body never mixes with batched values stays unbatched.
Batched scan_batch(const BatchArgs& a) {
  const ScanParams s(a.params);
  const size_t first_x = s.num_consts + s.num_carry, num_ys = s.body->outvars.size() - s.num_carry;
  std::vector<bool> carry_batched;
  for (size_t j = 0; j < s.num_carry; ++j) carry_batched.push_back(a.dims[s.num_consts + j] != kNotBatched);
  const auto body_dims = [&](const std::vector<bool>& carries) {
    BatchDims dims;
    for (size_t i = 0; i < a.in.size(); ++i) {
      const bool carry = i >= s.num_consts && i < first_x;
      dims.push_back((carry ? carries[i - s.num_consts] : a.dims[i] != kNotBatched) ? 0 : kNotBatched);
    }
    return dims;
  };
  const auto instantiate = [&](const std::vector<bool>& carries) {
    std::vector<bool> r(carries);
    r.resize(carries.size() + num_ys, false);
    return r;
  };
  for (size_t round = 0; round <= s.num_carry; ++round) {
    std::vector<bool> out =
        batch_program(*s.body, body_dims(carry_batched), a.size, instantiate(carry_batched)).out_batched;
    out.resize(s.num_carry);
    if (out == carry_batched) break;
    carry_batched = any_of_each({carry_batched, out}, s.num_carry);
  }
  const BatchDims dims = body_dims(carry_batched);
  const BatchedProgram body = batch_program(*s.body, dims, a.size, instantiate(carry_batched));
  Values in;
  for (size_t i = 0; i < a.in.size(); ++i)
    in.push_back(dims[i] == kNotBatched ? a.in[i] : batch_at(a.in[i], a.dims[i], i < first_x ? 0 : 1, a.size));
  Params params = a.params;
  params.set("jaxpr", body.program);
  Batched r{meshsim::bind(a.prim, in, params), {}};
  for (size_t j = 0; j < body.out_batched.size(); ++j)
    r.dims.push_back(!body.out_batched[j] ? kNotBatched : j < s.num_carry ? 0 : 1);
  return r;
}

}  // namespace meshsim
