#pragma once
// How JAX prints a mesh without its devices (kept out of mesh.h, which every unit includes).
#include <string>

#include "meshsim/core/mesh.h"

namespace meshsim {

// AbstractMesh('dp': 4, 'tp': 2, axis_types=(Explicit, Explicit), device_kind=cpu, ...)
std::string abstract_mesh_str(const Mesh& mesh);

}  // namespace meshsim
