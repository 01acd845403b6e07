// jit(*args; name, jaxpr): a jitted function called while another function is
// traced (a user's nested jax.jit, or a jax.numpy function JAX implements under
// jit, such as _where or _take). JAX keeps it as one equation holding the
// function's program; XLA inlines it, so the executors run the program's
// equations in place (runtime/inlined_calls.h), and autodiff, vmap and
// sharding see through it as they see through remat2.
#include "meshsim/ir/ops.h"
#include "meshsim/primitives/program_calls.h"
#include "meshsim/runtime/inlined_calls.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/transforms/vjp.h"

namespace meshsim {

void register_jit_primitive() {
  Primitive p = program_call("jit", "jaxpr");
  p.prints_as_call = true;
  // Differentiated as its body written in place: every residual is saved.
  p.vjp_split = [](const Values& in, const std::vector<bool>& active, const Params& params) {
    return linearize(*params.get<ProgramPtr>("jaxpr"), in, active);
  };
  // One call of the batched program, as JAX batches a nested jit: results the
  // batch does not reach stay unbatched.
  p.batch = [](const BatchArgs& a) {
    const std::vector<bool> batched = batched_flags(a.dims, 0, a.in.size());
    BatchDims in_dims;
    for (bool b : batched) in_dims.push_back(b ? 0 : kNotBatched);
    const Program& program = *a.params.get<ProgramPtr>("jaxpr");
    BatchedProgram body = batch_program(program, in_dims, a.size, std::vector<bool>(program.outvars.size(), false));
    Params params = a.params;
    params.set("jaxpr", body.program);
    Values out = meshsim::bind(a.prim, at_front(a, batched), params);
    BatchDims dims;
    for (bool b : body.out_batched) dims.push_back(b ? 0 : kNotBatched);
    return Batched{out, dims};
  };
  register_primitive(std::move(p));
  inline_when_compiled("jit", "jaxpr");
}

}  // namespace meshsim
