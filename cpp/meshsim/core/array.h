// Array: a user-visible global array — its type, how it is laid out over a
// mesh, and one local block per device. Devices holding the same block share
// one Tensor (a replicated value is stored once).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "meshsim/core/aval.h"
#include "meshsim/core/tensor.h"

namespace meshsim {

// Where an array lives: a NamedSharding (mesh + spec), or a single device.
struct Sharding {
  MeshPtr mesh;      // null: the single device `device`
  Spec spec;         // one entry per dimension (may be shorter: trailing unsharded)
  int device = 0;

  bool is_single_device() const { return mesh == nullptr; }
  int64_t num_devices() const { return mesh ? mesh->size() : 1; }
  // Block coordinates of device position `pos` along each dimension, and the
  // number of blocks per dimension.
  std::vector<int64_t> block_index(int64_t pos, int64_t ndim) const;
  std::vector<int64_t> blocks_per_dim(int64_t ndim) const;
  // Local block shape for a global shape; raises if a dimension does not divide.
  Shape local_shape(const Shape& global) const;
};
using ShardingPtr = std::shared_ptr<Sharding>;

// Raises ValueError for unknown axes, an axis used twice, a spec longer than `ndim`.
void check_spec(const Mesh& mesh, const Spec& spec, int64_t ndim);

// The value of an array that is still being computed (asynchronous dispatch,
// runtime/dispatch.h): set once by the stream computing it, immutable after.
class PendingValue {
 public:
  bool done() const;
  void wait() const;  // until set; may raise only what the blocking_wait policy raises (Ctrl-C)
  void set(ShardingPtr sharding, std::vector<Tensor> shards);
  void set_error(std::exception_ptr error);
  // After wait(): the value, or the error raised while computing it.
  const ShardingPtr& sharding() const;
  const std::vector<Tensor>& shards() const;
  bool sharding_if_set() const;  // after wait(): computed without error

 private:
  void finish();
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  ShardingPtr sharding_;
  std::vector<Tensor> shards_;
};
using PendingPtr = std::shared_ptr<PendingValue>;

// How a thread blocks until a value is ready. `wait_for(timeout)` waits at most
// `timeout` and returns whether the value is ready. The bindings install a
// policy that releases Python's GIL around the wait when the waiting thread
// holds it, and polls for signals meanwhile (Ctrl-C raises KeyboardInterrupt
// out of the wait and cancels the programs dispatched so far). Without one,
// the wait is plain and never throws.
using WaitFor = std::function<bool(std::chrono::milliseconds)>;
void set_blocking_wait(void (*policy)(const WaitFor&));
void blocking_wait(const WaitFor& wait_for);

// Threads may read, delete and donate one Array concurrently: its value
// (shards_, sharding_, pending_) never changes after construction, and
// deletion only sets `deleted_`, atomically, so a reader either got the value
// before the deletion or raises the deleted-array error, and of two threads
// donating one array exactly one succeeds (a call donating several arrays
// donates all of them or none). The buffers of a deleted array go
// when the Array itself goes (the Python object dropped), not at deletion.
class Array {
 public:
  Array(Aval aval, ShardingPtr sharding, std::vector<Tensor> shards);
  // A future: `aval` is known, the blocks come when `pending` is set; the
  // sharding too when `sharding` is null.
  Array(Aval aval, ShardingPtr sharding, PendingPtr pending);
  static std::shared_ptr<Array> from_tensor(Tensor t, bool weak_type = false);

  // The type never waits; everything else waits until the value is computed
  // and raises the error computing it raised, if any.
  const Aval& aval() const { return aval_; }
  const ShardingPtr& sharding() const;
  // One block per device position of the sharding's mesh.
  const std::vector<Tensor>& shards() const;
  // The whole value as one tensor (assembled from blocks when sharded).
  Tensor global() const;

  bool is_ready() const { return !pending_ || pending_->done(); }
  // Whether sharding() is known without waiting.
  bool has_sharding() const;
  void wait() const;  // until ready (raises only on Ctrl-C, see blocking_wait)
  const PendingPtr& pending() const { return pending_; }

  bool is_deleted() const { return deleted_.load(std::memory_order_acquire); }
  void mark_deleted();  // donation: the buffers now belong to someone else
  // Another Array holding this one's (possibly pending) value: what a
  // dispatched program keeps, so that deleting this one later cannot reach it.
  std::shared_ptr<Array> share() const;
  // Donation of a call's arguments: share() and delete each of `arrays`, as
  // one step with respect to other donations and deletions. If one of them
  // is deleted already, none is donated and `*deleted_index` names it.
  static std::vector<std::shared_ptr<Array>> donate_all(const std::vector<std::shared_ptr<Array>>& arrays,
                                                        size_t* deleted_index);

 private:
  void check_alive() const;
  Aval aval_;
  ShardingPtr sharding_;
  std::vector<Tensor> shards_;
  PendingPtr pending_;  // null once the value is known at construction
  std::atomic<bool> deleted_{false};
};
using ArrayPtr = std::shared_ptr<Array>;

// Splits `value` into per-device blocks for `sharding` (copying each distinct block once).
ArrayPtr shard_array(const Tensor& value, ShardingPtr sharding, bool weak_type);
// The type of a value of `shape` placed by `sharding` (null: unsharded): its
// spec keeps the mesh's Explicit axes.
Aval placed_aval(const Shape& shape, DType dtype, bool weak_type, const ShardingPtr& sharding);
// Assembles per-device blocks into the global tensor.
Tensor assemble(const std::vector<Tensor>& shards, const Sharding& sharding, const Shape& global);

}  // namespace meshsim
