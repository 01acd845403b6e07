// Tensor: a dense local block of one simulated device — a typed, strided view
// of reference-counted storage. Kernels read any strides and write contiguous.
#pragma once
#include <memory>

#include "meshsim/core/dtype.h"
#include "meshsim/core/shape.h"

namespace meshsim {

// Raw memory plus whatever keeps it alive (our allocation, or a NumPy array).
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<void> owner;
  bool ours = false;    // allocated by Tensor::empty: freed (or pooled) with the storage
  int pool_class = -1;  // the buffer pool's size class of our memory, -1 for none
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
};

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(DType dtype, const Shape& shape);  // contiguous, 64-byte aligned
  static Tensor zeros(DType dtype, const Shape& shape);
  // Wraps foreign memory without copying; `owner` keeps it alive.
  static Tensor wrap(void* data, DType dtype, const Shape& shape, const Strides& strides,
                     std::shared_ptr<void> owner);
  template <class T> static Tensor scalar(T value);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size() const { return num_elements(shape_); }
  size_t nbytes() const { return size() * itemsize(dtype_); }
  bool defined() const { return storage_ != nullptr; }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool shares_storage(const Tensor& o) const { return storage_ == o.storage_; }

  // Address of the element at index 0 (the view's offset applied).
  void* raw() const { return static_cast<char*>(storage_->data) + offset_ * itemsize(dtype_); }
  template <class T> T* data() const { return static_cast<T*>(raw()); }

  // Zero-copy views.
  Tensor view(const Shape& shape, const Strides& strides, int64_t offset_elems) const;
  Tensor broadcast_to(const Shape& shape) const;  // trailing-aligned, stride 0 on new dims
  Tensor transpose(const std::vector<int64_t>& perm) const;
  Tensor reshape(const Shape& shape) const;  // copies only when not contiguous
  Tensor slice(const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
               const std::vector<int64_t>& step) const;

  Tensor contiguous() const;  // this, or a packed copy
  Tensor copy() const;        // always a fresh contiguous buffer

 private:
  DType dtype_ = DType::Float32;
  Shape shape_;
  Strides strides_;
  int64_t offset_ = 0;
  std::shared_ptr<Storage> storage_;
};

// Copies `src` into `dst`: views of one shape and dtype, any strides (`dst`
// may be a view into a larger buffer).
void copy_into(const Tensor& src, const Tensor& dst);

template <class T>
Tensor Tensor::scalar(T value) {
  Tensor t = empty(dtype_of<T>(), {});
  *t.data<T>() = value;
  return t;
}

}  // namespace meshsim
