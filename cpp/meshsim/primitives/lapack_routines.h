// The LAPACK routines the decompositions call (OpenBLAS's LAPACK), as one
// overload set per routine over float, double, complex<float> and
// complex<double>, so that a kernel template names the routine once:
// potrf, getrf, geqrf, ungqr (orgqr for real types), heevd (syevd) and gesdd.
// heevd and gesdd run LAPACK's workspace query themselves (their complex forms
// take extra real workspaces). Included by decompositions.cpp and schur.cpp only.
#pragma once
#include <algorithm>
#include <complex>
#include <type_traits>
#include <vector>

#include "meshsim/primitives/lapack.h"

extern "C" {
using lapack_c64 = std::complex<float>;
using lapack_c128 = std::complex<double>;
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void cpotrf_(const char* uplo, const int* n, lapack_c64* a, const int* lda, int* info);
void zpotrf_(const char* uplo, const int* n, lapack_c128* a, const int* lda, int* info);
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void cgetrf_(const int* m, const int* n, lapack_c64* a, const int* lda, int* ipiv, int* info);
void zgetrf_(const int* m, const int* n, lapack_c128* a, const int* lda, int* ipiv, int* info);
#define MESHSIM_GEQRF(name, T) \
  void name(const int* m, const int* n, T* a, const int* lda, T* tau, T* work, const int* lwork, int* info);
MESHSIM_GEQRF(sgeqrf_, float)
MESHSIM_GEQRF(dgeqrf_, double)
MESHSIM_GEQRF(cgeqrf_, lapack_c64)
MESHSIM_GEQRF(zgeqrf_, lapack_c128)
#undef MESHSIM_GEQRF
#define MESHSIM_UNGQR(name, T)                                                                               \
  void name(const int* m, const int* n, const int* k, T* a, const int* lda, const T* tau, T* work, const int* lwork, \
            int* info);
MESHSIM_UNGQR(sorgqr_, float)
MESHSIM_UNGQR(dorgqr_, double)
MESHSIM_UNGQR(cungqr_, lapack_c64)
MESHSIM_UNGQR(zungqr_, lapack_c128)
#undef MESHSIM_UNGQR
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info);
void cheevd_(const char* jobz, const char* uplo, const int* n, lapack_c64* a, const int* lda, float* w,
             lapack_c64* work, const int* lwork, float* rwork, const int* lrwork, int* iwork, const int* liwork,
             int* info);
void zheevd_(const char* jobz, const char* uplo, const int* n, lapack_c128* a, const int* lda, double* w,
             lapack_c128* work, const int* lwork, double* rwork, const int* lrwork, int* iwork, const int* liwork,
             int* info);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s, float* u,
             const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork, int* iwork, int* info);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
             const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* iwork,
             int* info);
void cgesdd_(const char* jobz, const int* m, const int* n, lapack_c64* a, const int* lda, float* s,
             lapack_c64* u, const int* ldu, lapack_c64* vt, const int* ldvt, lapack_c64* work, const int* lwork,
             float* rwork, int* iwork, int* info);
void zgesdd_(const char* jobz, const int* m, const int* n, lapack_c128* a, const int* lda, double* s,
             lapack_c128* u, const int* ldu, lapack_c128* vt, const int* ldvt, lapack_c128* work,
             const int* lwork, double* rwork, int* iwork, int* info);
}

namespace meshsim::lapack {

// The real type of T's parts (T itself for real types).
template <class T>
using real_of = decltype(std::real(T{}));

inline void potrf(const int* n, float* a, int* info) { spotrf_("L", n, a, n, info); }
inline void potrf(const int* n, double* a, int* info) { dpotrf_("L", n, a, n, info); }
inline void potrf(const int* n, lapack_c64* a, int* info) { cpotrf_("L", n, a, n, info); }
inline void potrf(const int* n, lapack_c128* a, int* info) { zpotrf_("L", n, a, n, info); }

inline void getrf(const int* m, const int* n, float* a, const int* l, int* p, int* i) { sgetrf_(m, n, a, l, p, i); }
inline void getrf(const int* m, const int* n, double* a, const int* l, int* p, int* i) { dgetrf_(m, n, a, l, p, i); }
inline void getrf(const int* m, const int* n, lapack_c64* a, const int* l, int* p, int* i) {
  cgetrf_(m, n, a, l, p, i);
}
inline void getrf(const int* m, const int* n, lapack_c128* a, const int* l, int* p, int* i) {
  zgetrf_(m, n, a, l, p, i);
}

#define MESHSIM_OVERLOAD(T, geqrf_name, ungqr_name)                                                     \
  inline void geqrf(const int* m, const int* n, T* a, const int* l, T* t, T* w, const int* lw, int* i) { \
    geqrf_name(m, n, a, l, t, w, lw, i);                                                                 \
  }                                                                                                      \
  inline void ungqr(const int* m, const int* n, const int* k, T* a, const int* l, const T* t, T* w,      \
                    const int* lw, int* i) {                                                             \
    ungqr_name(m, n, k, a, l, t, w, lw, i);                                                              \
  }
MESHSIM_OVERLOAD(float, sgeqrf_, sorgqr_)
MESHSIM_OVERLOAD(double, dgeqrf_, dorgqr_)
MESHSIM_OVERLOAD(lapack_c64, cgeqrf_, cungqr_)
MESHSIM_OVERLOAD(lapack_c128, zgeqrf_, zungqr_)
#undef MESHSIM_OVERLOAD

// Eigenvalues (ascending, real) into w and eigenvectors over a (column-major,
// leading dimension max(n, 1)) of the Hermitian matrix in one triangle of a.
template <class T>
int heevd(bool lower, int n, T* a, real_of<T>* w) {
  using R = real_of<T>;
  const int ld = std::max(n, 1);
  const char* uplo = lower ? "L" : "U";
  int info = 0, lwork = -1, liwork = -1, lrwork = -1, iquery = 0;
  T query{};
  R rquery{};
  if constexpr (std::is_same_v<T, float>) ssyevd_("V", uplo, &n, a, &ld, w, &query, &lwork, &iquery, &liwork, &info);
  if constexpr (std::is_same_v<T, double>) dsyevd_("V", uplo, &n, a, &ld, w, &query, &lwork, &iquery, &liwork, &info);
  if constexpr (std::is_same_v<T, lapack_c64>)
    cheevd_("V", uplo, &n, a, &ld, w, &query, &lwork, &rquery, &lrwork, &iquery, &liwork, &info);
  if constexpr (std::is_same_v<T, lapack_c128>)
    zheevd_("V", uplo, &n, a, &ld, w, &query, &lwork, &rquery, &lrwork, &iquery, &liwork, &info);
  lwork = workspace(std::real(query));
  liwork = std::max(1, iquery);
  lrwork = workspace(rquery);
  std::vector<T> work(lwork);
  std::vector<int> iwork(liwork);
  std::vector<R> rwork(lrwork);
  if constexpr (std::is_same_v<T, float>)
    ssyevd_("V", uplo, &n, a, &ld, w, work.data(), &lwork, iwork.data(), &liwork, &info);
  if constexpr (std::is_same_v<T, double>)
    dsyevd_("V", uplo, &n, a, &ld, w, work.data(), &lwork, iwork.data(), &liwork, &info);
  if constexpr (std::is_same_v<T, lapack_c64>)
    cheevd_("V", uplo, &n, a, &ld, w, work.data(), &lwork, rwork.data(), &lrwork, iwork.data(), &liwork, &info);
  if constexpr (std::is_same_v<T, lapack_c128>)
    zheevd_("V", uplo, &n, a, &ld, w, work.data(), &lwork, rwork.data(), &lrwork, iwork.data(), &liwork, &info);
  return info;
}

// The singular values s (descending, real) and, per job ('N', 'S', 'A'), the
// singular vectors of the m x n column-major a (divide and conquer).
template <class T>
int gesdd(const char* job, int m, int n, T* a, int lda, real_of<T>* s, T* u, int ldu, T* vt, int ldvt) {
  using R = real_of<T>;
  const int k = std::min(m, n), big = std::max(m, n);
  std::vector<int> iwork(8 * static_cast<size_t>(std::max(k, 1)));
  // LAPACK's bound on the complex routines' real workspace.
  const size_t lrwork = job[0] == 'N' ? 7 * static_cast<size_t>(k) + 1
                                      : static_cast<size_t>(std::max(5 * k * k + 5 * k, 2 * big * k + 2 * k * k + k));
  std::vector<R> rwork(!std::is_same_v<T, R> ? std::max<size_t>(lrwork, 1) : 1);
  int info = 0, lwork = -1;
  T query{};
  auto call = [&](T* work) {
    if constexpr (std::is_same_v<T, float>)
      sgesdd_(job, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork.data(), &info);
    if constexpr (std::is_same_v<T, double>)
      dgesdd_(job, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork.data(), &info);
    if constexpr (std::is_same_v<T, lapack_c64>)
      cgesdd_(job, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork.data(), iwork.data(), &info);
    if constexpr (std::is_same_v<T, lapack_c128>)
      zgesdd_(job, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork.data(), iwork.data(), &info);
  };
  call(&query);
  lwork = workspace(std::real(query));
  std::vector<T> work(lwork);
  call(work.data());
  return info;
}

}  // namespace meshsim::lapack
