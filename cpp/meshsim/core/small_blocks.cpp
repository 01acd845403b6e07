// operator new and delete for the module's own code: small blocks are kept
// by the thread that frees them, for its next request of that size.
//
// Every tensor owns a few small heap blocks (its shape, its strides, the
// Storage with its counts, the vector of a kernel's results): a pipeline
// training step asks for ~450k of them, and glibc serves those bursts on its
// slow paths (its per-thread cache holds 7 blocks of a size; a block freed on
// another thread than the one that made it goes back to that thread's arena
// under a lock). Measured there, the allocator took ~23% of the
// instructions.
//
// Every block is a whole malloc chunk, whoever asked for it: a block this
// file hands out may be freed by code outside the module (libstdc++'s
// operator delete calls free), and a block malloc gave to such code may be
// freed here; malloc_usable_size tells which size class a freed block can
// serve, unless the caller says how many bytes it asked for (a sized delete:
// glibc's chunk for a request of n bytes holds the class of n bytes exactly,
// ours hold at least that; a checking allocator that gives exactly n bytes,
// as valgrind's memcheck does, would see such a block reused up to its
// class). The module does not export them (CMakeLists.txt), so only its own
// calls reach them. A block sits on at most one thread's list or is owned by
// its caller. Sanitizer builds keep the standard ones: a reused block would
// hide a use after free.
#include <malloc.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace meshsim {
namespace {

// Class c holds blocks with at least 16 c + 8 usable bytes (glibc's chunk
// sizes): 24, 40, ..., 504 bytes.
constexpr size_t kClasses = 32;
constexpr size_t kMaxPerClass = 512;

constexpr size_t class_bytes(size_t c) { return 16 * c + 8; }
// The class a request of n bytes is served from.
inline size_t class_of_request(size_t n) { return n <= 24 ? 1 : (n + 7) / 16; }

struct Block {
  Block* next;
};

// A thread's lists. Trivially destructible and zero-initialised, so reaching
// it costs one thread-local lookup and no guard: new and delete run ~450k
// times a step, and each lookup of a thread_local in a shared library is a
// call (__tls_get_addr).
struct ThreadBlocks {
  Block* head[kClasses];
  uint32_t count[kClasses];
  bool ready;  // `cleanup` below is registered for this thread
  bool gone;   // the thread is ending: blocks go straight to malloc and free
};
thread_local ThreadBlocks blocks;

// Frees the thread's blocks when the thread ends.
struct Cleanup {
  ~Cleanup() {
    ThreadBlocks& t = blocks;
    for (size_t c = 0; c < kClasses; ++c)
      while (Block* b = t.head[c]) {
        t.head[c] = b->next;
        std::free(b);
      }
    t.gone = true;
  }
};

// The calling thread's lists, or nullptr while it ends.
inline ThreadBlocks* mine() {
  ThreadBlocks* t = &blocks;
  asm("" : "+r"(t));  // the address as a plain value: GCC would look it up again for each use
  if (__builtin_expect(!t->ready, 0)) {
    if (t->gone) return nullptr;
    thread_local Cleanup cleanup;  // registered on the thread's first use
    (void)cleanup;
    t->ready = true;
  }
  return t->gone ? nullptr : t;
}

void* allocate(size_t n) {
  const size_t c = class_of_request(n);
  if (c < kClasses) {
    if (ThreadBlocks* t = mine(); t && t->head[c]) {
      Block* b = t->head[c];
      t->head[c] = b->next;
      --t->count[c];
      return b;
    }
    n = class_bytes(c);
  }
  if (void* p = std::malloc(n)) return p;
  throw std::bad_alloc();
}

// Keeps p, a block of at least class_bytes(c) usable bytes, on class c's list
// (c == 0 or c >= kClasses: too small or too large to keep).
void release_to_class(void* p, size_t c) {
  if (c > 0 && c < kClasses)
    if (ThreadBlocks* t = mine(); t && t->count[c] < kMaxPerClass) {
      Block* b = static_cast<Block*>(p);
      b->next = t->head[c];
      t->head[c] = b;
      ++t->count[c];
      return;
    }
  std::free(p);
}

void release(void* p) {
  if (!p) return;
  const size_t usable = malloc_usable_size(p);
  release_to_class(p, usable < 24 ? 0 : (usable - 8) / 16);
}

// A block of a request of n bytes: allocate() gave it class_of_request(n)
// or a larger class, malloc(n) elsewhere a chunk of that class (glibc rounds
// n + 8 up to 16 bytes, a minimum of 32), so it is kept without asking
// malloc its size (a call and a read of the chunk's header per delete).
void release_sized(void* p, size_t n) {
  if (!p) return;
  release_to_class(p, class_of_request(n));
}

}  // namespace
}  // namespace meshsim

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
void* operator new(size_t n) { return meshsim::allocate(n); }
void* operator new[](size_t n) { return meshsim::allocate(n); }
void operator delete(void* p) noexcept { meshsim::release(p); }
void operator delete[](void* p) noexcept { meshsim::release(p); }
void operator delete(void* p, size_t n) noexcept { meshsim::release_sized(p, n); }
void operator delete[](void* p, size_t n) noexcept { meshsim::release_sized(p, n); }
#endif
