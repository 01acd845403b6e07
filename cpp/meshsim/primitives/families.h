// Each family of primitives lives in one file (or one folder) and is listed
// here, or adds itself (add_primitive_family); the bindings fill the registry
// (ir/primitive.h) once at import.
#pragma once

namespace meshsim {

void register_elementwise_primitives();  // elementwise*.cpp: arithmetic, math, comparisons, casts, complex
void register_reduction_primitives();    // reduction.cpp: reduce_*, argmax/argmin, cumulative;
                                         // windows.cpp: reduce_window_*, select_and_{scatter,gather}_add
void register_structural_primitives();   // structural.cpp: broadcast, reshape, transpose, slice, concat, pad, ...
void register_linalg_primitives();       // linalg.cpp: dot_general; convolution.cpp: conv_general_dilated
void register_decomposition_primitives(); // decompositions.cpp: cholesky, lu, qr, eigh, svd, triangular_solve
void register_indexing_primitives();     // indexing.cpp: gather/scatter, dynamic_slice, take
void register_sorting_primitives();      // sorting.cpp: sort, argsort, top_k
void register_random_primitives();       // random.cpp: threefry2x32 and bit manipulation
void register_creation_primitives();     // creation.cpp: iota, full
void register_autodiff_primitives();     // autodiff.cpp: remat2, custom_vjp_call, stop_gradient, name
void register_shard_map_primitive();     // shard_map.cpp: a body program run on every device
void register_sharding_primitives();     // sharding.cpp: reshard, sharding_constraint, mesh_cast
void register_control_flow_primitives(); // control_flow.cpp: cond, while, scan
void register_callback_primitives();     // callback.cpp: debug_callback, pure_callback

inline void (*const kPrimitiveFamilies[])() = {
    register_elementwise_primitives, register_reduction_primitives,
    register_structural_primitives,  register_linalg_primitives,
    register_decomposition_primitives,
    register_indexing_primitives,    register_sorting_primitives,
    register_random_primitives,      register_creation_primitives,
    register_shard_map_primitive,
    register_sharding_primitives,
    register_autodiff_primitives,    register_control_flow_primitives,
    register_callback_primitives,
};

// A family file that lists itself nowhere else (each file of collectives/)
// registers itself at load, at namespace scope:
//   const bool kRegistered = add_primitive_family(register_foo_primitives);
// Such families register after the ones listed above, in link order (the
// module links every unit of the core whole, CMakeLists.txt), so none may look
// up another's primitives while registering. Returns true.
bool add_primitive_family(void (*register_family)());

// Registers every family, once (later calls do nothing).
void register_all_primitives();

}  // namespace meshsim
