#include "meshsim/core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <sys/mman.h>

#include "meshsim/core/error.h"
#include "meshsim/core/strided.h"

namespace meshsim {

namespace {

// Buffers of this many bytes or more are asked to be backed by 2 MiB pages
// (transparent huge pages in "madvise" mode; NumPy asks the same for arrays
// of 4 MiB and more). On 4 KiB pages a streaming kernel over a 16 MiB operand
// that is not in cache (a large sum, x + x, a fused chain) ran 10-25% slower:
// a TLB miss every 4 KiB, and a new page every 64 cache lines.
constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr size_t kHugePagesFrom = size_t{4} << 20;

void* allocate(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  if (bytes < kHugePagesFrom) return std::aligned_alloc(64, bytes);
  bytes = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, bytes);
#ifdef MADV_HUGEPAGE
  if (p) madvise(p, bytes, MADV_HUGEPAGE);  // advice only: failure leaves 4 KiB pages
#endif
  return p;
}

// Freed buffers of up to 64 MiB, kept by size class for the next tensor of
// that class. A program allocates the same sizes call after call; without
// this, large blocks go back to the OS and every call pays page faults again,
// and small aligned ones cost malloc's slow path.
class BufferPool {
 public:
  static BufferPool& get() {
    static BufferPool* pool = new BufferPool;  // never destroyed: tensors may outlive statics
    return *pool;
  }

  // Size class of `bytes` (four per doubling), or -1 when not pooled.
  static int size_class(size_t bytes) {
    if (bytes > kMax) return -1;
    bytes = std::max(bytes, kMin + 1);
    const int log = 63 - __builtin_clzll(bytes - 1);  // 2^log < bytes <= 2^(log+1)
    const size_t step = size_t{1} << (log - 2);
    const int quarter = static_cast<int>((bytes - 1 - (size_t{1} << log)) / step);  // 0..3
    return (log - kMinLog) * 4 + quarter;
  }
  static size_t class_bytes(int c) {
    const int log = c / 4 + kMinLog;
    return (size_t{1} << log) + (size_t{1} << (log - 2)) * (c % 4 + 1);
  }

  void* take(int c) {
    if (Local* l = c < kLocalClasses ? local() : nullptr) {
      std::vector<void*>& mine = l->free[c];
      if (!mine.empty()) {
        void* p = mine.back();
        mine.pop_back();
        return p;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& free = free_[c];
      if (!free.empty()) {
        void* p = free.back();
        free.pop_back();
        cached_ -= class_bytes(c);
        return p;
      }
    }
    return allocate(class_bytes(c));
  }

  void give(void* p, int c) {
    if (Local* l = c < kLocalClasses ? local() : nullptr) {
      std::vector<void*>& mine = l->free[c];
      if (mine.size() < kLocalPerClass) {
        mine.push_back(p);
        return;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + class_bytes(c) <= kMaxCached) {
        free_[c].push_back(p);
        cached_ += class_bytes(c);
        return;
      }
    }
    std::free(p);
  }

 private:
  static constexpr int kMinLog = 6;
  static constexpr size_t kMin = size_t{1} << kMinLog, kMax = size_t{1} << 26;
  static constexpr size_t kMaxCached = size_t{1} << 28;
  // Small buffers (up to 64 KiB) are first kept by the thread freeing them,
  // a few per class, so the many small tensors of a device task never wait
  // on the shared mutex; a thread that ends hands its buffers back.
  static constexpr int kLocalClasses = (16 - kMinLog) * 4;
  static constexpr size_t kLocalPerClass = 16;
  struct Local {
    std::vector<void*> free[kLocalClasses];
    ~Local() {
      for (int c = 0; c < kLocalClasses; ++c)
        for (void* p : free[c]) std::free(p);
      gone() = true;  // tensors freed later in the thread's exit go to the shared pool
    }
  };
  static bool& gone() {
    thread_local bool flag = false;  // trivially destructible: readable to the thread's end
    return flag;
  }
  static Local* local() {
    if (gone()) return nullptr;
    thread_local Local mine;
    return &mine;
  }
  std::mutex mutex_;
  std::vector<void*> free_[(26 - kMinLog + 1) * 4];
  size_t cached_ = 0;
};

}  // namespace

Tensor Tensor::empty(DType dtype, const Shape& shape) {
  for (int64_t d : shape)
    if (d < 0) fail<ValueError>("negative dimensions are not allowed: ", shape_str(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  auto st = std::make_shared<Storage>();
  st->nbytes = std::max<size_t>(t.nbytes(), 1);
  const int c = BufferPool::size_class(st->nbytes);
  void* p = c >= 0 ? BufferPool::get().take(c) : allocate(st->nbytes);
  if (!p) throw std::bad_alloc();
  st->data = p;
  st->ours = true;
  st->pool_class = c;
  t.storage_ = std::move(st);
  return t;
}

Storage::~Storage() {
  if (!ours) return;
  if (pool_class >= 0) BufferPool::get().give(data, pool_class);
  else std::free(data);
}

Tensor Tensor::zeros(DType dtype, const Shape& shape) {
  Tensor t = empty(dtype, shape);
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

Tensor Tensor::wrap(void* data, DType dtype, const Shape& shape, const Strides& strides,
                    std::shared_ptr<void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = strides;
  auto st = std::make_shared<Storage>();
  st->data = data;
  st->owner = std::move(owner);
  t.storage_ = std::move(st);
  return t;
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

// The views below fill in the result's shape and strides themselves (an empty
// vector costs no allocation), rather than build them aside to be copied.
Tensor Tensor::view(const Shape& shape, const Strides& strides, int64_t offset_elems) const {
  Tensor t;  // not a copy of *this: its shape and strides would be allocated only to be replaced
  t.dtype_ = dtype_;
  t.shape_ = shape;
  t.strides_ = strides;
  t.offset_ = offset_ + offset_elems;
  t.storage_ = storage_;
  return t;
}

Tensor Tensor::broadcast_to(const Shape& shape) const {
  if (shape.size() < shape_.size())
    fail<ValueError>("cannot broadcast ", shape_str(shape_), " to ", shape_str(shape));
  size_t lead = shape.size() - shape_.size();
  Tensor t = view({}, {}, 0);
  t.strides_.assign(shape.size(), 0);
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] == shape[lead + i]) t.strides_[lead + i] = strides_[i];
    else if (shape_[i] != 1)
      fail<ValueError>("cannot broadcast ", shape_str(shape_), " to ", shape_str(shape));
  }
  t.shape_ = shape;
  return t;
}

Tensor Tensor::transpose(const std::vector<int64_t>& perm) const {
  Tensor t = view({}, {}, 0);
  t.shape_.resize(perm.size());
  t.strides_.resize(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    t.shape_[i] = shape_[perm[i]];
    t.strides_[i] = strides_[perm[i]];
  }
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (num_elements(shape) != size())
    fail<ValueError>("cannot reshape array of shape ", shape_str(shape_), " (size ", size(),
                     ") into shape ", shape_str(shape), " (size ", num_elements(shape), ")");
  Tensor t = contiguous().view(shape, {}, 0);
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::slice(const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
                     const std::vector<int64_t>& step) const {
  Shape s(shape_.size());
  Strides st(shape_.size());
  int64_t off = 0;
  for (size_t i = 0; i < shape_.size(); ++i) {
    int64_t n = step[i] > 0 ? (stop[i] - start[i] + step[i] - 1) / step[i]
                            : (start[i] - stop[i] - step[i] - 1) / (-step[i]);
    s[i] = std::max<int64_t>(n, 0);
    st[i] = strides_[i] * step[i];
    off += start[i] * strides_[i];
  }
  Tensor t = view({}, {}, s.empty() || num_elements(s) ? off : 0);
  t.shape_ = std::move(s);
  t.strides_ = std::move(st);
  return t;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : copy(); }

Tensor Tensor::copy() const {
  Tensor out = empty(dtype_, shape_);
  copy_into(*this, out);
  return out;
}

namespace {

// Element by element, for views with no contiguous run longer than one
// element (a broadcast scalar, a transposed block): one memcpy call per
// element would cost more than the copy.
template <class T>
void copy_elements(const Tensor& src, const Tensor& dst) {
  const T* s = static_cast<const T*>(src.raw());
  T* d = static_cast<T*>(dst.raw());
  for_each_offsets<2>(src.shape(), {&src.strides(), &dst.strides()},
                      [&](const std::array<int64_t, 2>& off) { d[off[1]] = s[off[0]]; });
}

// A transposed block, dst[r * dst_ld + c] = src[r + c * src_ld], copied by
// square tiles of 16 elements (32 one-byte ones), so that a tile's source
// lines stay in L1 while it is read across.
template <class T>
void copy_transposed(const T* src, int64_t src_ld, T* dst, int64_t dst_ld, int64_t rows, int64_t cols) {
  constexpr int64_t tile = sizeof(T) == 1 ? 32 : 16;
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    const int64_t r1 = std::min(rows, r0 + tile);
    for (int64_t c0 = 0; c0 < cols; c0 += tile) {
      const int64_t c1 = std::min(cols, c0 + tile);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) dst[r * dst_ld + c] = src[r + c * src_ld];
    }
  }
}

// Views whose last two dims are a transposed pair (the source steps by one
// element down the second-to-last, the destination along the last: a
// transpose being laid out) with a source row stride that is a multiple of
// 2 KiB: the element walk reads down a column, and such a stride puts every
// read in 2 of L1's 64 sets, which hold 16-24 lines. Tiles measured 2-4x
// faster there (transposes of f32[2048,2048], u8[4096,4096]) and up to 2x
// slower on strides that spread over the sets (docs/architecture.md, "Layout
// work"), so only those blocks, each at least a tile long, go by tiles.
template <class T>
bool copy_transposed_blocks(const Tensor& src, const Tensor& dst) {
  const int64_t nd = src.ndim();
  if (nd < 2 || src.strides()[nd - 2] != 1 || dst.strides()[nd - 1] != 1) return false;
  const Shape& shape = src.shape();
  const int64_t rows = shape[nd - 2], cols = shape[nd - 1];
  const int64_t src_ld = src.strides()[nd - 1], dst_ld = dst.strides()[nd - 2];
  const bool colliding = src_ld > 0 && src_ld * static_cast<int64_t>(sizeof(T)) % 2048 == 0;
  if (!colliding || rows < 16 || cols < 16 || dst_ld <= 0) return false;
  const Shape outer(shape.begin(), shape.end() - 2);
  const Strides ss(src.strides().begin(), src.strides().end() - 2);
  const Strides ds(dst.strides().begin(), dst.strides().end() - 2);
  const T* s = static_cast<const T*>(src.raw());
  T* d = static_cast<T*>(dst.raw());
  for_each_offsets<2>(outer, {&ss, &ds}, [&](const std::array<int64_t, 2>& off) {
    copy_transposed(s + off[0], src_ld, d + off[1], dst_ld, rows, cols);
  });
  return true;
}

// Element by element, or by tiles for a transposed block.
template <class T>
void copy_strided(const Tensor& src, const Tensor& dst) {
  if (!copy_transposed_blocks<T>(src, dst)) copy_elements<T>(src, dst);
}

// Any views, with heap-held walks: views of more dims than CopyDims holds, or
// elements wider than 8 bytes that are not in contiguous rows.
void copy_into_general(const Tensor& src, const Tensor& dst) {
  if (src.size() == 0) return;
  // memcpy runs over the longest trailing block both store contiguously.
  const Shape& shape = src.shape();
  const size_t isz = itemsize(src.dtype());
  int64_t k = src.ndim(), run = 1;
  for (; k > 0; --k) {
    const int64_t d = k - 1;
    if (shape[d] != 1 && (src.strides()[d] != run || dst.strides()[d] != run)) break;
    run *= shape[d];
  }
  if (run == 1 && k > 0) {
    switch (isz) {
      case 1: return copy_strided<uint8_t>(src, dst);
      case 2: return copy_strided<uint16_t>(src, dst);
      case 4: return copy_strided<uint32_t>(src, dst);
      case 8: return copy_strided<uint64_t>(src, dst);
      default: break;
    }
  }
  const Shape outer(shape.begin(), shape.begin() + k);
  const Strides ss(src.strides().begin(), src.strides().begin() + k);
  const Strides ds(dst.strides().begin(), dst.strides().begin() + k);
  const char* s0 = static_cast<const char*>(src.raw());
  char* d0 = static_cast<char*>(dst.raw());
  const int64_t w = static_cast<int64_t>(isz);
  for_each_offsets<2>(outer, {&ss, &ds}, [&](const std::array<int64_t, 2>& off) {
    std::memcpy(d0 + off[1] * w, s0 + off[0] * w, run * isz);
  });
}

// The dims of a copy with size-1 dims dropped and neighbours that both views
// step through as one merged, innermost first, in fixed arrays: most copies
// are of small blocks (a loop's rows, a view made contiguous), where heap
// vectors for the walk's shape, strides and counters cost more than the copy.
struct CopyDims {
  static constexpr int kMax = 12;
  int n = 0;
  int64_t size[kMax], src[kMax], dst[kMax];

  // False when the views have more than kMax dims left after merging.
  bool merge(const Tensor& s, const Tensor& d) {
    for (int64_t k = s.ndim(); k-- > 0;) {
      const int64_t len = s.shape()[k];
      if (len == 1) continue;
      if (n > 0 && s.strides()[k] == src[n - 1] * size[n - 1] && d.strides()[k] == dst[n - 1] * size[n - 1]) {
        size[n - 1] *= len;
        continue;
      }
      if (n == kMax) return false;
      size[n] = len;
      src[n] = s.strides()[k];
      dst[n] = d.strides()[k];
      ++n;
    }
    return true;
  }
};

// Calls row(src_offset, dst_offset) for every innermost row of `m` (dims 1..n-1
// walked row-major), offsets in elements.
template <class Row>
void for_each_copy_row(const CopyDims& m, Row&& row) {
  int64_t idx[CopyDims::kMax] = {};
  int64_t s = 0, d = 0;
  while (true) {
    row(s, d);
    int k = 1;
    for (; k < m.n; ++k) {
      s += m.src[k];
      d += m.dst[k];
      if (++idx[k] < m.size[k]) break;
      s -= m.src[k] * m.size[k];
      d -= m.dst[k] * m.size[k];
      idx[k] = 0;
    }
    if (k >= m.n) return;
  }
}

template <class T>
void copy_rows(const CopyDims& m, const Tensor& src, const Tensor& dst) {
  const T* s0 = static_cast<const T*>(src.raw());
  T* d0 = static_cast<T*>(dst.raw());
  const int64_t len = m.size[0], ss = m.src[0], ds = m.dst[0];
  for_each_copy_row(m, [&](int64_t s, int64_t d) {
    const T* from = s0 + s;
    T* to = d0 + d;
    if (ds == 1)  // the common destination, a contiguous block: a loop of its own
      for (int64_t i = 0; i < len; ++i) to[i] = from[i * ss];
    else
      for (int64_t i = 0; i < len; ++i) to[i * ds] = from[i * ss];
  });
}

// Element by element, or by tiles for a transposed block.
template <class T>
void copy_strided_rows(const CopyDims& m, const Tensor& src, const Tensor& dst) {
  if (!copy_transposed_blocks<T>(src, dst)) copy_rows<T>(m, src, dst);
}

}  // namespace

void copy_into(const Tensor& src, const Tensor& dst) {
  if (src.size() == 0) return;
  const size_t isz = itemsize(src.dtype());
  CopyDims m;
  if (!m.merge(src, dst)) return copy_into_general(src, dst);
  if (m.n == 0) {  // one element
    std::memcpy(dst.raw(), src.raw(), isz);
    return;
  }
  if (m.src[0] != 1 || m.dst[0] != 1) {  // no contiguous rows: element by element
    switch (isz) {
      case 1: return copy_strided_rows<uint8_t>(m, src, dst);
      case 2: return copy_strided_rows<uint16_t>(m, src, dst);
      case 4: return copy_strided_rows<uint32_t>(m, src, dst);
      case 8: return copy_strided_rows<uint64_t>(m, src, dst);
      default: return copy_into_general(src, dst);
    }
  }
  const char* s0 = static_cast<const char*>(src.raw());
  char* d0 = static_cast<char*>(dst.raw());
  const int64_t w = static_cast<int64_t>(isz);
  const size_t row_bytes = static_cast<size_t>(m.size[0]) * isz;
  for_each_copy_row(m, [&](int64_t s, int64_t d) { std::memcpy(d0 + d * w, s0 + s * w, row_bytes); });  // memcpy per row
}

}  // namespace meshsim
