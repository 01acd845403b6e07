// The simulated mesh: runs a shard_map body on every device of a mesh.
//
// Execution is lock-step. The body's equations are cut at each collective:
// a run of local equations executes as one TBB parallel_for over devices
// (each task runs the run on one device's blocks and never blocks; a light
// run goes device by device on the calling thread instead), and each
// collective executes as one function over all devices' buffers. So any
// number of devices runs on any number of cores without deadlock, an error on
// a device cancels the others and surfaces once, and the result does not
// depend on the thread count.
#pragma once
#include <functional>
#include <vector>

#include "meshsim/core/mesh.h"
#include "meshsim/ir/program.h"

namespace meshsim {

// What a collective sees of the mesh it runs on.
class MeshContext {
 public:
  explicit MeshContext(const Mesh& mesh, bool vma_checked = false)
      : mesh_(mesh), vma_checked_(vma_checked) {}
  const Mesh& mesh() const { return mesh_; }
  bool vma_checked() const { return vma_checked_; }  // the body's types hold VMAs (run_on_mesh)
  int64_t num_devices() const { return mesh_.size(); }

  // Index of the device at mesh position `pos` along `axes`: row-major over
  // the axes in the order given (the first is the most significant).
  int64_t axis_index(int64_t pos, const AxisNames& axes) const;
  int64_t axis_size(const AxisNames& axes) const;
  // The replica groups of a collective over `axes`: devices that differ only
  // in their coordinates along `axes`. Member r of a group is the device whose
  // axis_index over `axes` is r.
  std::vector<std::vector<int64_t>> groups(const AxisNames& axes) const;
  // Runs f(i) for i in [0, n) on the worker threads.
  void parallel_for(int64_t n, const std::function<void(int64_t)>& f) const;

 private:
  const Mesh& mesh_;
  bool vma_checked_;
};

// Runs f() with OpenBLAS kept to one thread (as while a mesh runs): for
// programs of small products, where its thread pool costs more than it saves.
void with_one_blas_thread(const std::function<void()>& f);

// Runs `body` on every device: `args[pos]` are the inputs of the device at
// mesh position `pos`; returns each device's outputs. Devices whose inputs to
// a local equation are equal share one computation of it; with `vma_checked`
// (a body traced with check_vma=True) blocks of an input or a collective's
// result are equal along the axes their type is invariant over, otherwise
// only where they are the same buffer.
std::vector<Tensors> run_on_mesh(const ProgramPtr& body, const Mesh& mesh,
                                 std::vector<Tensors> args, bool vma_checked = false);
// A sub-program call of a higher-order primitive's `mesh_call`, on the mesh it runs on.
inline std::vector<Tensors> run_on_mesh(const ProgramPtr& body, const MeshContext& ctx,
                                        std::vector<Tensors> args) {
  return run_on_mesh(body, ctx.mesh(), std::move(args), ctx.vma_checked());
}

}  // namespace meshsim
