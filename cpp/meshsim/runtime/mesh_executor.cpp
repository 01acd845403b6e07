#include "meshsim/runtime/mesh_executor.h"

#include <algorithm>
#include <mutex>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "meshsim/runtime/interpreter.h"

extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);

namespace meshsim {

int64_t MeshContext::axis_index(int64_t pos, const AxisNames& axes) const {
  std::vector<int64_t> c = mesh_.coords(pos);
  int64_t i = 0;
  for (const auto& a : axes) {
    int p = mesh_.axis_position(a);
    i = i * mesh_.axis_sizes[p] + c[p];
  }
  return i;
}

int64_t MeshContext::axis_size(const AxisNames& axes) const {
  int64_t n = 1;
  for (const auto& a : axes) n *= mesh_.axis_size(a);
  return n;
}

std::vector<std::vector<int64_t>> MeshContext::groups(const AxisNames& axes) const {
  AxisNames others;
  for (const auto& a : mesh_.axis_names)
    if (std::find(axes.begin(), axes.end(), a) == axes.end()) others.push_back(a);
  const int64_t size = axis_size(axes);
  std::vector<std::vector<int64_t>> out(num_devices() / size, std::vector<int64_t>(size));
  for (int64_t pos = 0; pos < num_devices(); ++pos)
    out[axis_index(pos, others)][axis_index(pos, axes)] = pos;
  return out;
}

void MeshContext::parallel_for(int64_t n, const std::function<void(int64_t)>& f) const {
  if (n == 1) return f(0);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t i = r.begin(); i != r.end(); ++i) f(i);
  });
}

namespace {

// One BLAS thread per device task while any mesh runs: the parallelism comes
// from the devices, and OpenBLAS's own pool would oversubscribe the cores.
// Counted, so programs running concurrently on several meshes agree on it.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (active_++ == 0) {
      saved_ = openblas_get_num_threads();
      openblas_set_num_threads(1);
    }
  }
  ~SingleThreadedBlas() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--active_ == 0) openblas_set_num_threads(saved_);
  }

 private:
  static inline std::mutex mutex_;
  static inline int active_ = 0;
  static inline int saved_ = 1;
};

}  // namespace

std::vector<Tensors> run_on_mesh(const Program& body, const Mesh& mesh, std::vector<Tensors> args) {
  const int64_t n = mesh.size();
  MeshContext ctx(mesh);
  std::vector<std::vector<Tensor>> env(n, std::vector<Tensor>(body.avals.size()));
  for (int64_t d = 0; d < n; ++d) {
    if (args[d].size() != body.invars.size())
      fail<TypeError>("shard_map body expects ", body.invars.size(), " arguments, got ",
                      args[d].size());
    for (size_t i = 0; i < body.constvars.size(); ++i) env[d][body.constvars[i]] = body.consts[i];
    for (size_t i = 0; i < args[d].size(); ++i) env[d][body.invars[i]] = std::move(args[d][i]);
  }
  const std::vector<int> last = last_uses(body);
  auto release_dead = [&](int64_t d, size_t k) {
    for (int v : body.eqns[k].inputs)
      if (last[v] == static_cast<int>(k)) env[d][v] = Tensor();
  };
  std::vector<Avals> out_avals(body.eqns.size());
  for (size_t j = 0; j < body.eqns.size(); ++j)
    for (int v : body.eqns[j].outputs) out_avals[j].push_back(body.avals[v]);

  SingleThreadedBlas one_blas_thread;
  size_t k = 0;
  while (k < body.eqns.size()) {
    const Equation& e = body.eqns[k];
    if (e.prim->is_collective()) {
      std::vector<Tensors> ins(n);
      for (int64_t d = 0; d < n; ++d)
        for (int v : e.inputs) ins[d].push_back(env[d][v]);
      std::vector<Tensors> res = e.prim->mesh_kernel(ctx, ins, e.params, out_avals[k]);
      for (int64_t d = 0; d < n; ++d) {
        for (size_t i = 0; i < e.outputs.size(); ++i) env[d][e.outputs[i]] = std::move(res[d][i]);
        release_dead(d, k);
      }
      ++k;
      continue;
    }
    // The run of local equations up to the next collective, on every device at once.
    size_t end = k;
    while (end < body.eqns.size() && !body.eqns[end].prim->is_collective()) ++end;
    ctx.parallel_for(n, [&, begin = k](int64_t d) {
      Tensors ins;
      for (size_t j = begin; j < end; ++j) {
        const Equation& eq = body.eqns[j];
        ins.clear();
        for (int v : eq.inputs) ins.push_back(env[d][v]);
        Tensors res = run_primitive(*eq.prim, ins, eq.params, out_avals[j]);
        for (size_t i = 0; i < res.size(); ++i) env[d][eq.outputs[i]] = std::move(res[i]);
        release_dead(d, j);
      }
    });
    k = end;
  }

  std::vector<Tensors> results(n);
  for (int64_t d = 0; d < n; ++d)
    for (int v : body.outvars) results[d].push_back(env[d][v]);
  return results;
}

}  // namespace meshsim
