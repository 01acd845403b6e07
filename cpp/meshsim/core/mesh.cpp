#include "meshsim/core/mesh.h"
#include "meshsim/core/mesh_repr.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "meshsim/core/error.h"
#include "meshsim/core/sub_axes.h"

namespace meshsim {

const char* axis_type_name(AxisType t) {
  switch (t) {
    case AxisType::Auto: return "Auto";
    case AxisType::Explicit: return "Explicit";
    case AxisType::Manual: return "Manual";
  }
  return "?";
}

int64_t Mesh::size() const {
  int64_t n = 1;
  for (int64_t s : axis_sizes) n *= s;
  return n;
}

int Mesh::axis_position(const std::string& name) const {
  auto it = std::find(axis_names.begin(), axis_names.end(), name);
  return it == axis_names.end() ? -1 : static_cast<int>(it - axis_names.begin());
}

int64_t Mesh::axis_size(const std::string& name) const {
  int p = axis_position(name);
  if (p < 0 && is_sub_axis(name)) return axis_part(*this, name).size;
  if (p < 0) fail<ValueError>("axis name '", name, "' is not in the mesh ", str());
  return axis_sizes[p];
}

bool Mesh::is_explicit(const std::string& name) const {
  int p = axis_position(parent_axis(name));
  return p >= 0 && axis_types[p] == AxisType::Explicit;
}

std::vector<int64_t> Mesh::coords(int64_t pos) const {
  std::vector<int64_t> c(axis_sizes.size());
  for (size_t i = axis_sizes.size(); i-- > 0;) {
    c[i] = pos % axis_sizes[i];
    pos /= axis_sizes[i];
  }
  return c;
}

AxisNames Mesh::in_mesh_order(const AxisNames& names) const {
  AxisNames out;
  for (const auto& a : axis_names)
    if (std::find(names.begin(), names.end(), a) != names.end()) out.push_back(a);
  for (const auto& a : names)  // names the mesh does not know keep their order, last
    if (axis_position(a) < 0) out.push_back(a);
  return out;
}

std::string Mesh::str() const {
  if (axis_names.empty()) return "Mesh()";
  std::ostringstream os;
  os << "Mesh(";
  for (size_t i = 0; i < axis_names.size(); ++i)
    os << (i ? ", " : "") << "'" << axis_names[i] << "': " << axis_sizes[i];
  os << ", axis_types=(";
  for (size_t i = 0; i < axis_types.size(); ++i)
    os << (i ? ", " : "") << axis_type_name(axis_types[i]);
  os << (axis_types.size() == 1 ? ",))" : "))");
  return os.str();
}

std::string abstract_mesh_str(const Mesh& mesh) {
  std::string s = "AbstractMesh(";
  std::string types;
  for (size_t i = 0; i < mesh.axis_names.size(); ++i) {
    s += (i ? ", '" : "'") + mesh.axis_names[i] + "': " + std::to_string(mesh.axis_sizes[i]);
    types += (i ? ", " : "") + std::string(axis_type_name(mesh.axis_types[i]));
  }
  if (mesh.axis_names.size() == 1) types += ",";
  return s + ", axis_types=(" + types + "), device_kind=cpu, num_cores=None, platform=cpu)";
}

MeshPtr make_mesh_checked(AxisNames names, std::vector<int64_t> sizes,
                          std::vector<AxisType> types, std::vector<int> device_ids) {
  if (names.size() != sizes.size())
    fail<ValueError>("Mesh axis names ", names.size(), " and shape ", sizes.size(),
                     " must have the same length");
  std::set<std::string> seen;
  for (const auto& n : names)
    if (!seen.insert(n).second) fail<ValueError>("Mesh axis names must be unique, got '", n, "' twice");
  if (types.empty()) types.assign(names.size(), AxisType::Auto);
  if (types.size() != names.size())
    fail<ValueError>("Number of axis names should match the number of axis_types. Got axis_names=",
                     names.size(), " and axis_types=", types.size());
  auto m = std::make_shared<Mesh>();
  m->axis_names = std::move(names);
  m->axis_sizes = std::move(sizes);
  m->axis_types = std::move(types);
  m->device_ids = std::move(device_ids);
  if (m->size() != static_cast<int64_t>(m->device_ids.size()))
    fail<ValueError>("Mesh shape of size ", m->size(), " does not match the number of devices ",
                     m->device_ids.size());
  std::set<int> ids(m->device_ids.begin(), m->device_ids.end());
  if (ids.size() != m->device_ids.size()) fail<ValueError>("Mesh devices must be unique");
  return m;
}

}  // namespace meshsim
