// Three ways through a convolution, chosen by the size of each group's
// product and by which side, input or output, has fewer positions:
//  - a blocked im2col: a block of output positions (across examples) gathers
//    its windows into a [rows, window x in features] matrix, one contiguous
//    feature run per window offset, and one BLAS gemm against the group's
//    [window x in features, out features] filters writes the block's rows of
//    the result in place. The block stays in cache; a 1x1 window that reads
//    every input element in order skips the gather and multiplies the input.
//  - when the input has fewer elements than the output (a transposed
//    convolution, whose gathered windows are mostly holes), the same product from the input side: a block
//    of input rows times the filters as [in, window x out], each row's window
//    offsets then added into the outputs that read it (col2im).
//  - a direct loop when a group has few input or output features (depthwise
//    and the filter gradients of grouped convolutions), where a gemm would
//    be a row of dot products and the gathered matrix as large as the work.
#include "meshsim/kernels/convolution.h"

#include <cblas.h>

#include <algorithm>
#include <type_traits>

#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/gemm.h"

namespace meshsim {
namespace {

// C[M, N] = A[M, K] @ B[K, N], row-major with leading dimensions: real
// products in meshsim's kernel (kernels/gemm.h), so a block of output
// positions, one device's examples, has the bits the whole batch gives them.
template <class T>
void gemm(int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    ordered_gemm(M, N, K, StridedMatrix<T>{a, lda, 1}, StridedMatrix<T>{b, ldb, 1}, c, ldc);
  } else if constexpr (std::is_same_v<T, complex64>) {
    const T one(1), zero(0);
    cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, &one, a, lda, b, ldb, &zero, c, ldc);
  } else if constexpr (std::is_same_v<T, complex128>) {
    const T one(1), zero(0);
    cblas_zgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, &one, a, lda, b, ldb, &zero, c, ldc);
  } else {
    for (int64_t i = 0; i < M; ++i) {
      T* row = c + i * ldc;
      std::fill(row, row + N, T(0));
      for (int64_t p = 0; p < K; ++p) {
        const T av = a[i * lda + p];
        const T* brow = b + p * ldb;
        for (int64_t j = 0; j < N; ++j) row[j] = static_cast<T>(row[j] + av * brow[j]);
      }
    }
  }
}

// The input element (flat over the input's spatial dims) that window offset k
// of output position p reads, at [p * window + k], or -1 for a hole.
struct WindowSources {
  int64_t positions = 1, window = 1, inputs = 1;
  std::vector<int64_t> at{0};

  explicit WindowSources(const std::vector<WindowDim>& dims) {
    for (const WindowDim& d : dims) {
      const std::vector<int64_t> along = window_reads(d);
      std::vector<int64_t> next(at.size() * d.out * d.window);
      for (int64_t p = 0; p < positions; ++p)
        for (int64_t o = 0; o < d.out; ++o)
          for (int64_t k = 0; k < window; ++k)
            for (int64_t kk = 0; kk < d.window; ++kk) {
              const int64_t outer = at[p * window + k], q = along[kk * d.out + o];
              next[((p * d.out + o) * window + k) * d.window + kk] = outer < 0 || q < 0 ? -1 : outer * d.in + q;
            }
      at = std::move(next);
      positions *= d.out;
      window *= d.window;
      inputs *= d.in;
    }
  }

  // Per input element q and window offset k, the output position that reads
  // q through k, at [q * window + k], or -1 for none: the same pairs seen
  // from the input side.
  std::vector<int64_t> targets() const {
    std::vector<int64_t> to(inputs * window, -1);
    for (int64_t p = 0; p < positions; ++p)
      for (int64_t k = 0; k < window; ++k)
        if (const int64_t q = at[p * window + k]; q >= 0) to[q * window + k] = p;
    return to;
  }

  // Whether output position p reads input element p and nothing else.
  bool identity() const {
    if (window != 1 || positions != inputs) return false;
    for (int64_t p = 0; p < positions; ++p)
      if (at[p] != p) return false;
    return true;
  }
};

template <class T>
class Convolution {
 public:
  Convolution(const T* x, const T* w, T* out, const ConvGeometry& g)
      : x_(x), w_(w), out_(out), g_(g), src_(g.spatial), out_per_group_(g.out_features / g.groups) {}

  void run() const {
    if (out_per_group_ == 1 || g_.in_features * out_per_group_ <= 16)
      direct();
    else if (fewer_inputs_than_outputs())
      scattered_gemm();
    else
      blocked_gemm();
  }

 private:
  // Where example n's features of group `group` start, at spatial element 0.
  const T* input(int64_t group, int64_t n) const {
    const int64_t example = g_.batch_grouped ? group * g_.examples + n : n;
    return x_ + example * src_.inputs * g_.lhs_features + (g_.batch_grouped ? 0 : group * g_.in_features);
  }

  void blocked_gemm() const {
    const int64_t I = g_.in_features, O = g_.out_features, Og = out_per_group_, K = src_.window;
    const int64_t C = g_.lhs_features, depth = K * I, rows = g_.examples * src_.positions;
    if (g_.groups == 1 && I == C && src_.identity()) {
      gemm<T>(rows, O, I, x_, C, w_, O, out_, O);
      return;
    }
    // A block of about 512 KiB: in cache while BLAS packs it, and at least
    // enough rows to keep the gemm efficient.
    const int64_t block = std::min(rows, std::max<int64_t>(32, (int64_t{1} << 19) / (sizeof(T) * depth)));
    std::vector<T> cols(block * depth);
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
      const int64_t n_rows = std::min(block, rows - r0);
      for (int64_t group = 0; group < g_.groups; ++group) {
        for (int64_t r = 0; r < n_rows; ++r) {
          const int64_t n = (r0 + r) / src_.positions, p = (r0 + r) % src_.positions;
          const T* xe = input(group, n);
          const int64_t* s = src_.at.data() + p * K;
          T* dst = cols.data() + r * depth;
          for (int64_t k = 0; k < K; ++k, dst += I) {
            if (s[k] < 0)
              std::fill_n(dst, I, T(0));
            else
              std::copy_n(xe + s[k] * C, I, dst);
          }
        }
        gemm<T>(n_rows, Og, depth, cols.data(), depth, w_ + group * Og, O, out_ + r0 * O + group * Og, O);
      }
    }
  }

  // Both products visit every (position, window offset) pair of their side,
  // reading or not: from the output side P x window, from the input side
  // S x window. An input dilated into more outputs than it has elements
  // (transposed convolutions, input gradients of strided ones) is cheaper
  // from the input side.
  bool fewer_inputs_than_outputs() const { return src_.inputs < src_.positions; }

  // Each block of input rows times the group's filters as [in, window x out]
  // gives every window offset's contribution at once; each is added to the
  // output position that reads the row through that offset.
  void scattered_gemm() const {
    const int64_t I = g_.in_features, O = g_.out_features, Og = out_per_group_, K = src_.window;
    const int64_t C = g_.lhs_features, S = src_.inputs, P = src_.positions, width = K * Og;
    const std::vector<int64_t> to = src_.targets();
    std::vector<T> filters(g_.groups * I * width);  // [group, in, window, out of the group]
    for (int64_t group = 0; group < g_.groups; ++group)
      for (int64_t i = 0; i < I; ++i)
        for (int64_t k = 0; k < K; ++k)
          std::copy_n(w_ + (k * I + i) * O + group * Og, Og, filters.data() + ((group * I + i) * K + k) * Og);
    std::fill_n(out_, g_.examples * P * O, T(0));
    const int64_t rows = g_.examples * S;
    const int64_t block = std::min(rows, std::max<int64_t>(32, (int64_t{1} << 19) / (sizeof(T) * width)));
    std::vector<T> products(block * width);
    for (int64_t group = 0; group < g_.groups; ++group)
      for (int64_t r0 = 0; r0 < rows; r0 += block) {
        const int64_t n_rows = std::min(block, rows - r0);
        gemm<T>(n_rows, width, I, input(group, 0) + r0 * C, C, filters.data() + group * I * width, width,
                products.data(), width);
        for (int64_t r = 0; r < n_rows; ++r) {
          const int64_t n = (r0 + r) / S, q = (r0 + r) % S;
          const int64_t* t = to.data() + q * K;
          const T* row = products.data() + r * width;
          for (int64_t k = 0; k < K; ++k) {
            if (t[k] < 0) continue;
            T* dst = out_ + (n * P + t[k]) * O + group * Og;
            for (int64_t j = 0; j < Og; ++j) dst[j] = static_cast<T>(dst[j] + row[k * Og + j]);
          }
        }
      }
  }

  void direct() const {
    const int64_t I = g_.in_features, O = g_.out_features, Og = out_per_group_, K = src_.window;
    const int64_t C = g_.lhs_features, G = g_.groups;
    const bool depthwise = I == 1 && Og == 1 && !g_.batch_grouped;
    for (int64_t n = 0; n < g_.examples; ++n)
      for (int64_t p = 0; p < src_.positions; ++p) {
        T* acc = out_ + (n * src_.positions + p) * O;
        std::fill_n(acc, O, T(0));
        const int64_t* s = src_.at.data() + p * K;
        for (int64_t k = 0; k < K; ++k) {
          if (s[k] < 0) continue;
          const T* wk = w_ + k * I * O;
          if (depthwise) {  // one feature per group: a vector multiply-add across the groups
            const T* xs = input(0, n) + s[k] * C;
            for (int64_t c = 0; c < G; ++c) acc[c] = static_cast<T>(acc[c] + xs[c] * wk[c]);
            continue;
          }
          for (int64_t group = 0; group < G; ++group) {
            const T* xs = input(group, n) + s[k] * C;
            T* ag = acc + group * Og;
            for (int64_t i = 0; i < I; ++i) {
              const T xv = xs[i];
              const T* wrow = wk + i * O + group * Og;
              for (int64_t j = 0; j < Og; ++j) ag[j] = static_cast<T>(ag[j] + xv * wrow[j]);
            }
          }
        }
      }
  }

  const T* x_;
  const T* w_;
  T* out_;
  const ConvGeometry& g_;
  const WindowSources src_;
  const int64_t out_per_group_;
};

}  // namespace

void conv_channels_last(DType dtype, const void* x, const void* w, void* out, const ConvGeometry& geometry) {
  dispatch_admitted<EitherDTypes<ComplexDTypes, WideNumericDTypes>>(dtype, [&](auto tag) {
    using T = decltype(tag);
    Convolution<T>(static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(out), geometry).run();
  });
}

}  // namespace meshsim
