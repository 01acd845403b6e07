#include "meshsim/core/array.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>

#include "meshsim/core/error.h"
#include "meshsim/core/sub_axes.h"

namespace meshsim {

std::vector<int64_t> Sharding::block_index(int64_t pos, int64_t ndim) const {
  std::vector<int64_t> idx(ndim, 0);
  if (!mesh) return idx;
  std::vector<int64_t> c = mesh->coords(pos);
  for (size_t d = 0; d < spec.size() && d < static_cast<size_t>(ndim); ++d) {
    // Tuple order: the first axis is the most significant.
    int64_t i = 0;
    for (const auto& a : spec[d]) i = i * mesh->axis_size(a) + axis_coord(*mesh, a, c);
    idx[d] = i;
  }
  return idx;
}

std::vector<int64_t> Sharding::blocks_per_dim(int64_t ndim) const {
  std::vector<int64_t> n(ndim, 1);
  if (!mesh) return n;
  for (size_t d = 0; d < spec.size() && d < static_cast<size_t>(ndim); ++d)
    for (const auto& a : spec[d]) n[d] *= mesh->axis_size(a);
  return n;
}

Shape Sharding::local_shape(const Shape& global) const {
  Shape local = global;
  std::vector<int64_t> n = blocks_per_dim(static_cast<int64_t>(global.size()));
  for (size_t d = 0; d < global.size(); ++d) {
    if (global[d] % n[d] != 0)
      fail<ValueError>("One of device_put args was given the sharding of ", "NamedSharding(mesh=",
                       mesh->str(), ", spec=", spec_entry_str(spec[d]),
                       "), which implies that the global size of its dimension ", d,
                       " should be divisible by ", n[d], ", but it is equal to ", global[d],
                       " (full shape: ", shape_str(global), ")");
    local[d] = global[d] / n[d];
  }
  return local;
}

void check_spec(const Mesh& mesh, const Spec& spec, int64_t ndim) {
  if (static_cast<int64_t>(spec.size()) > ndim)
    fail<ValueError>("PartitionSpec has ", spec.size(), " entries but the array has rank ", ndim,
                     ": a spec cannot be longer than the array's rank");
  std::set<std::string> used;
  for (const auto& entry : spec)
    for (const auto& a : entry) {
      if (mesh.axis_position(a) < 0)
        fail<ValueError>("Resource axis: ", a, " of the PartitionSpec is not found in mesh: ",
                         mesh.str());
      if (!used.insert(a).second)
        fail<ValueError>("A PartitionSpec uses the mesh axis '", a,
                         "' more than once; each mesh axis may shard at most one dimension");
    }
}

bool PendingValue::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void PendingValue::wait() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
  }
  blocking_wait([this](std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [this] { return done_; });
  });
}

void PendingValue::set(ShardingPtr sharding, std::vector<Tensor> shards) {
  sharding_ = std::move(sharding);
  shards_ = std::move(shards);
  finish();
}

void PendingValue::set_error(std::exception_ptr error) {
  error_ = std::move(error);
  finish();
}

void PendingValue::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

bool PendingValue::sharding_if_set() const { return !error_ && sharding_; }

const ShardingPtr& PendingValue::sharding() const {
  if (error_) std::rethrow_exception(error_);
  return sharding_;
}

const std::vector<Tensor>& PendingValue::shards() const {
  if (error_) std::rethrow_exception(error_);
  return shards_;
}

namespace {
std::atomic<void (*)(const WaitFor&)> g_blocking_wait{nullptr};
}

void set_blocking_wait(void (*policy)(const WaitFor&)) { g_blocking_wait = policy; }

void blocking_wait(const WaitFor& wait_for) {
  if (auto policy = g_blocking_wait.load()) return policy(wait_for);
  while (!wait_for(std::chrono::hours(1))) {
  }
}

Array::Array(Aval aval, ShardingPtr sharding, std::vector<Tensor> shards)
    : aval_(std::move(aval)), sharding_(std::move(sharding)), shards_(std::move(shards)) {
  if (!sharding_) sharding_ = std::make_shared<Sharding>();
}

Array::Array(Aval aval, ShardingPtr sharding, PendingPtr pending)
    : aval_(std::move(aval)), sharding_(std::move(sharding)), pending_(std::move(pending)) {}

std::shared_ptr<Array> Array::from_tensor(Tensor t, bool weak_type) {
  Aval a;
  a.shape = t.shape();
  a.dtype = t.dtype();
  a.weak_type = weak_type;
  return std::make_shared<Array>(std::move(a), nullptr, std::vector<Tensor>{std::move(t)});
}

void Array::check_alive() const {
  if (is_deleted())  // JAX's RuntimeError
    fail<std::runtime_error>("Array has been deleted with shape=",
                             aval_.str_short(/*short_dtypes=*/false), ".");
}

void Array::wait() const {
  if (pending_) pending_->wait();
}

bool Array::has_sharding() const {
  return sharding_ || (pending_ && pending_->done() && pending_->sharding_if_set());
}

const ShardingPtr& Array::sharding() const {
  if (sharding_) return sharding_;
  check_alive();
  pending_->wait();
  return pending_->sharding();
}

const std::vector<Tensor>& Array::shards() const {
  check_alive();
  if (!pending_) return shards_;
  pending_->wait();
  return pending_->shards();
}

Tensor Array::global() const {
  const std::vector<Tensor>& blocks = shards();
  const ShardingPtr& s = sharding();
  if (s->is_single_device()) return blocks[0];
  return assemble(blocks, *s, aval_.shape);
}

namespace {
// Deletions and donations take it, so that a call's donations are one step.
std::mutex g_deletion_mutex;
}  // namespace

void Array::mark_deleted() {
  std::lock_guard<std::mutex> lock(g_deletion_mutex);
  deleted_.store(true, std::memory_order_release);
}

std::shared_ptr<Array> Array::share() const {
  check_alive();
  return pending_ ? std::make_shared<Array>(aval_, sharding_, pending_)
                  : std::make_shared<Array>(aval_, sharding_, shards_);
}

std::vector<std::shared_ptr<Array>> Array::donate_all(const std::vector<std::shared_ptr<Array>>& arrays,
                                                     size_t* deleted_index) {
  std::lock_guard<std::mutex> lock(g_deletion_mutex);
  for (size_t i = 0; i < arrays.size(); ++i)
    if (arrays[i]->is_deleted()) {
      *deleted_index = i;
      return {};
    }
  std::vector<std::shared_ptr<Array>> moved;
  for (const auto& a : arrays) {
    moved.push_back(a->pending_ ? std::make_shared<Array>(a->aval_, a->sharding_, a->pending_)
                                : std::make_shared<Array>(a->aval_, a->sharding_, a->shards_));
    a->deleted_.store(true, std::memory_order_release);
  }
  return moved;
}

Aval placed_aval(const Shape& shape, DType dtype, bool weak_type, const ShardingPtr& sharding) {
  Aval aval;
  aval.shape = shape;
  aval.dtype = dtype;
  aval.weak_type = weak_type;
  if (!sharding || sharding->is_single_device()) return aval;
  const int64_t ndim = static_cast<int64_t>(shape.size());
  // Sub-axes come from propagation's layouts, never from a user's spec.
  Spec named = sharding->spec;
  for (AxisNames& entry : named) entry.erase(std::remove_if(entry.begin(), entry.end(), is_sub_axis), entry.end());
  check_spec(*sharding->mesh, named, ndim);
  aval.mesh = sharding->mesh;
  aval.spec.assign(ndim, {});
  // Only Explicit axes are part of the type; Auto axes are placement alone.
  for (size_t d = 0; d < sharding->spec.size(); ++d)
    for (const auto& a : sharding->spec[d])
      if (sharding->mesh->is_explicit(a)) aval.spec[d].push_back(a);
  return aval;
}

ArrayPtr shard_array(const Tensor& value, ShardingPtr sharding, bool weak_type) {
  Aval aval = placed_aval(value.shape(), value.dtype(), weak_type, sharding);
  if (sharding->is_single_device())
    return std::make_shared<Array>(std::move(aval), sharding, std::vector<Tensor>{value});
  const int64_t ndim = value.ndim();
  Shape local = sharding->local_shape(value.shape());
  std::map<std::vector<int64_t>, Tensor> blocks;  // one copy per distinct block
  std::vector<Tensor> shards;
  for (int64_t pos = 0; pos < sharding->num_devices(); ++pos) {
    std::vector<int64_t> bi = sharding->block_index(pos, ndim);
    auto it = blocks.find(bi);
    if (it == blocks.end()) {
      std::vector<int64_t> start(ndim), stop(ndim), step(ndim, 1);
      for (int64_t d = 0; d < ndim; ++d) {
        start[d] = bi[d] * local[d];
        stop[d] = start[d] + local[d];
      }
      it = blocks.emplace(bi, value.slice(start, stop, step).copy()).first;
    }
    shards.push_back(it->second);
  }
  return std::make_shared<Array>(std::move(aval), std::move(sharding), std::move(shards));
}

Tensor assemble(const std::vector<Tensor>& shards, const Sharding& sharding, const Shape& global) {
  const int64_t ndim = static_cast<int64_t>(global.size());
  Tensor out = Tensor::empty(shards.at(0).dtype(), global);
  std::set<std::vector<int64_t>> done;
  for (int64_t pos = 0; pos < static_cast<int64_t>(shards.size()); ++pos) {
    std::vector<int64_t> bi = sharding.block_index(pos, ndim);
    if (!done.insert(bi).second) continue;
    const Tensor& b = shards[pos];
    std::vector<int64_t> start(ndim), stop(ndim), step(ndim, 1);
    for (int64_t d = 0; d < ndim; ++d) {
      start[d] = bi[d] * b.shape()[d];
      stop[d] = start[d] + b.shape()[d];
    }
    copy_into(b, out.slice(start, stop, step));
  }
  return out;
}

}  // namespace meshsim
