#include "meshsim/ir/program_consts.h"
#include "meshsim/transforms/batching.h"

#include <algorithm>

#include "meshsim/ir/ops.h"

namespace meshsim {
namespace {

Shape without(const Shape& shape, int64_t dim) {
  Shape s = shape;
  if (dim != kNotBatched) s.erase(s.begin() + dim);
  return s;
}

Shape with(const Shape& shape, int64_t dim, int64_t size) {
  Shape s = shape;
  s.insert(s.begin() + dim, size);
  return s;
}

// A rule's outputs must be the equation's per-example outputs plus a batch
// dimension of the right size: checked so that a wrong rule fails loudly.
void check_batched(const Primitive& prim, const Batched& r, const Avals& want, int64_t size) {
  if (r.out.size() != want.size() || r.dims.size() != want.size())
    fail<std::logic_error>("the batching rule of '", prim.name, "' returned ", r.out.size(), " outputs for ",
                           want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Aval got = aval_of(r.out[i]);
    const int64_t d = r.dims[i];
    const bool ok = d == kNotBatched ? got.shape == want[i].shape
                                     : d >= 0 && d < got.ndim() && got.shape[d] == size &&
                                           without(got.shape, d) == want[i].shape;
    if (!ok || got.dtype != want[i].dtype)
      fail<std::logic_error>("the batching rule of '", prim.name, "' returned ", got.str_short(),
                             " batched at ", d, " for a per-example ", want[i].str_short());
  }
}

}  // namespace

Value batch_at(const Value& x, int64_t dim, int64_t to, int64_t size) {
  const Shape& shape = aval_of(x).shape;
  if (dim == kNotBatched) {
    IntList dims;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) dims.push_back(d < to ? d : d + 1);
    // JAX's batching.broadcast computes the dims with np.delete: its jaxprs print them as np.int64.
    Params params{{"shape", IntList(with(shape, to, size))}, {"broadcast_dimensions", dims}};
    params.set("numpy_dims", IntList(dims.size(), 1));
    return meshsim::bind(primitive("broadcast_in_dim"), {x}, params)[0];
  }
  if (dim == to) return x;
  IntList perm;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (d != dim) perm.push_back(d);
  perm.insert(perm.begin() + to, dim);
  return ops::transpose(x, perm);
}

IntList shift_axes(const IntList& axes, int64_t by) {
  IntList r;
  for (int64_t a : axes) r.push_back(a + by);
  return r;
}

Batched bind_at_front(const BatchArgs& a, const Params& params, const std::vector<bool>& front) {
  Values in;
  for (size_t i = 0; i < a.in.size(); ++i)
    in.push_back(front[i] ? batch_at(a.in[i], a.dims[i], 0, a.size) : a.in[i]);
  Values out = meshsim::bind(a.prim, in, params);
  return {out, BatchDims(out.size(), 0)};
}

Batched bind_at_front(const BatchArgs& a, const Params& params) {
  return bind_at_front(a, params, std::vector<bool>(a.in.size(), true));
}

namespace {

// `scalars_stay`: an unbatched 0-d operand stays one, as JAX's broadcast_batcher leaves it.
Batched elementwise_rule(const BatchArgs& a, bool scalars_stay) {
  const size_t n = a.in.size();
  std::vector<Shape> shapes;  // per example
  int64_t rank = 0;
  for (size_t i = 0; i < n; ++i) {
    shapes.push_back(without(aval_of(a.in[i]).shape, a.dims[i]));
    rank = std::max<int64_t>(rank, shapes.back().size());
  }
  // The batch stays where the first full-rank batched operand has it (no
  // transpose), except last: primitives like bitcast_convert_type change the
  // trailing dimension.
  int64_t bd = 0;
  for (size_t i = 0; i < n; ++i)
    if (a.dims[i] != kNotBatched && static_cast<int64_t>(shapes[i].size()) == rank) {
      bd = a.dims[i] < rank ? a.dims[i] : 0;
      break;
    }
  Shape full;  // per-example result shape (NumPy-style, for threefry2x32)
  for (const Shape& s : shapes) full = broadcast_shapes(full, s);
  Values in;
  std::vector<size_t> kept_scalars;
  for (size_t i = 0; i < n; ++i) {
    const int64_t r = shapes[i].size();
    if (r == 0 && a.dims[i] == kNotBatched && scalars_stay) {
      kept_scalars.push_back(i);
      in.push_back(a.in[i]);
    } else if (r == rank) {
      in.push_back(batch_at(a.in[i], a.dims[i], bd, a.size));
    } else if (a.dims[i] == kNotBatched) {
      in.push_back(a.in[i]);  // a scalar operand the primitive broadcasts itself
    } else {
      // A batched lower-rank operand (a scalar bound of clamp, select_n's
      // predicate): broadcast it to the full batched shape.
      const Value x = batch_at(a.in[i], a.dims[i], 0, a.size);
      IntList dims{bd};
      for (int64_t k = 0; k < r; ++k) {
        const int64_t q = rank - r + k;
        dims.push_back(q < bd ? q : q + 1);
      }
      Shape target = with(full, bd, a.size);
      for (int64_t k = 0; k < r; ++k) target[dims[k + 1]] = std::max(target[dims[k + 1]], shapes[i][k]);
      in.push_back(ops::broadcast_in_dim(x, target, dims));
    }
  }
  if (rank == 0 && !kept_scalars.empty() && a.prim.abstract_eval) {
    // A primitive whose shape rule wants equal shapes (pow) gets its scalars batched too.
    Avals avals;
    for (const Value& v : in) avals.push_back(aval_of(v));
    try {
      a.prim.abstract_eval(avals, a.params);
    } catch (...) {
      for (size_t i : kept_scalars) in[i] = batch_at(a.in[i], a.dims[i], bd, a.size);
    }
  }
  Values out = meshsim::bind(a.prim, in, a.params);
  return {out, BatchDims(out.size(), bd)};
}

}  // namespace

Batched batch_broadcasting(const BatchArgs& a) {
  const size_t n = a.in.size();
  size_t first = 0;
  while (a.dims[first] == kNotBatched) ++first;
  const Shape& shape = aval_of(a.in[first]).shape;
  bool agree = true;
  for (size_t i = 0; i < n; ++i)
    if (aval_of(a.in[i]).ndim() > 0) agree = agree && aval_of(a.in[i]).shape == shape && a.dims[i] == a.dims[first];
  if (agree) {
    Values out = meshsim::bind(a.prim, a.in, a.params);
    return {out, BatchDims(out.size(), a.dims[first])};
  }
  Values in;
  int64_t rank = 0;
  for (size_t i = 0; i < n; ++i) {
    const Aval& x = aval_of(a.in[i]);
    if (x.ndim() == 0) {
      in.push_back(a.in[i]);
    } else if (a.dims[i] == kNotBatched) {
      in.push_back(batch_at(a.in[i], kNotBatched, 0, 1));  // a size-1 batch dim the op broadcasts
    } else {
      in.push_back(batch_at(a.in[i], a.dims[i], 0, a.size));
    }
    rank = std::max<int64_t>(rank, aval_of(in.back()).ndim());
  }
  for (size_t i = 0; i < n; ++i) {
    const Shape& s = aval_of(in[i]).shape;
    if (a.dims[i] == kNotBatched || static_cast<int64_t>(s.size()) == rank) continue;
    Shape expanded = s;
    expanded.resize(rank, 1);
    IntList dims;
    for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) dims.push_back(d);
    in[i] = ops::broadcast_in_dim(in[i], expanded, dims);
  }
  Values out = meshsim::bind(a.prim, in, a.params);
  return {out, BatchDims(out.size(), 0)};
}

Batched batch_elementwise(const BatchArgs& a) { return elementwise_rule(a, /*scalars_stay=*/true); }

Batched batch_elementwise_of_one_shape(const BatchArgs& a) { return elementwise_rule(a, /*scalars_stay=*/false); }

// The fallback for primitives without a rule: correct for any primitive (each
// example sees exactly the operand types the equation was traced with), but
// one bind per example.
Batched batch_per_example(const BatchArgs& a) {
  const size_t n = a.in.size();
  std::vector<Values> per_out;  // [output][example]
  if (a.size == 0) {
    Avals avals;
    for (size_t i = 0; i < n; ++i) {
      Aval v = aval_of(a.in[i]);
      v.shape = without(v.shape, a.dims[i]);
      avals.push_back(v);
    }
    Batched r;
    for (Aval v : infer_avals(a.prim, avals, a.params)) {
      v.shape = with(v.shape, 0, 0);
      r.out.push_back(ops::zeros(v));
      r.dims.push_back(0);
    }
    return r;
  }
  for (int64_t b = 0; b < a.size; ++b) {
    Values in;
    for (size_t i = 0; i < n; ++i) {
      const int64_t d = a.dims[i];
      in.push_back(d == kNotBatched ? a.in[i] : ops::squeeze(ops::slice_in_dim(a.in[i], b, b + 1, d), {d}));
    }
    Values out = meshsim::bind(a.prim, in, a.params);
    per_out.resize(out.size());
    for (size_t j = 0; j < out.size(); ++j)
      per_out[j].push_back(ops::reshape(out[j], with(aval_of(out[j]).shape, 0, 1)));
  }
  Batched r;
  for (const Values& examples : per_out) {
    r.out.push_back(ops::concatenate(examples, 0));
    r.dims.push_back(0);
  }
  return r;
}

Batched batch_eval(const Program& p, const Values& args, const BatchDims& dims, int64_t size) {
  if (args.size() != p.invars.size() || dims.size() != args.size())
    fail<TypeError>("program expects ", p.invars.size(), " arguments, got ", args.size());
  std::vector<std::optional<Value>> env(p.avals.size());
  BatchDims bdim(p.avals.size(), kNotBatched);
  for (size_t i = 0; i < p.constvars.size(); ++i) {
    const int v = p.constvars[i];
    env[v] = Value(const_array(p, i));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    env[p.invars[i]] = args[i];
    bdim[p.invars[i]] = dims[i];
  }
  for (const Equation& e : p.eqns) {
    SourceInfoScope source(e.source_info);
    Values in;
    BatchDims in_dims;
    bool any = false;
    for (int v : e.inputs) {
      in.push_back(*env[v]);
      in_dims.push_back(bdim[v]);
      any = any || bdim[v] != kNotBatched;
    }
    Batched r;
    if (!any) {
      r.out = meshsim::bind(*e.prim, in, e.params);
      r.dims.assign(r.out.size(), kNotBatched);
    } else {
      const BatchArgs args{*e.prim, in, in_dims, e.params, size};
      r = e.prim->batch         ? e.prim->batch(args)
          : e.prim->elementwise ? batch_elementwise(args)
                                : batch_per_example(args);
      Avals want;
      for (int v : e.outputs) want.push_back(p.avals[v]);
      check_batched(*e.prim, r, want, size);
    }
    for (size_t i = 0; i < e.outputs.size(); ++i) {
      env[e.outputs[i]] = r.out[i];
      bdim[e.outputs[i]] = r.dims[i];
    }
  }
  Batched result;
  for (int v : p.outvars) {
    result.out.push_back(*env[v]);
    result.dims.push_back(bdim[v]);
  }
  return result;
}

BatchedProgram batch_program(const Program& program, const BatchDims& in_dims, int64_t size,
                             const std::vector<bool>& instantiate) {
  TracePtr trace = push_trace();
  try {
    Values args;
    for (size_t i = 0; i < program.invars.size(); ++i) {
      Aval a = program.avals[program.invars[i]];
      if (const int64_t d = in_dims[i]; d != kNotBatched) {
        a.shape = with(a.shape, d, size);
        if (!a.spec.empty()) a.spec.insert(a.spec.begin() + std::min<int64_t>(d, a.spec.size()), AxisNames{});
      }
      args.push_back(trace->new_input(a));
    }
    Batched r = batch_eval(program, args, in_dims, size);
    BatchedProgram result;
    Values outs;
    for (size_t j = 0; j < r.out.size(); ++j) {
      const bool batched = instantiate[j] || r.dims[j] != kNotBatched;
      outs.push_back(batched ? batch_at(r.out[j], r.dims[j], 0, size) : r.out[j]);
      result.out_batched.push_back(batched);
    }
    result.program = trace->finish(outs);
    pop_trace(trace);
    return result;
  } catch (...) {
    pop_trace(trace);
    throw;
  }
}

ProgramPtr batch_program(const Program& program, const std::vector<bool>& batched, int64_t size) {
  BatchDims dims;
  for (bool b : batched) dims.push_back(b ? 0 : kNotBatched);
  return batch_program(program, dims, size, std::vector<bool>(program.outvars.size(), true)).program;
}

}  // namespace meshsim
