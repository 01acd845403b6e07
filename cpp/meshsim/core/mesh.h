// The device mesh as the core sees it: named axes over a set of device ids.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace meshsim {

enum class AxisType : uint8_t { Auto, Explicit, Manual };
const char* axis_type_name(AxisType t);

using AxisNames = std::vector<std::string>;

struct Mesh {
  AxisNames axis_names;
  std::vector<int64_t> axis_sizes;
  std::vector<AxisType> axis_types;
  std::vector<int> device_ids;  // row-major over the axes

  int64_t size() const;
  int axis_position(const std::string& name) const;  // -1 if absent
  int64_t axis_size(const std::string& name) const;  // raises naming the axis
  bool is_explicit(const std::string& name) const;
  // Mesh coordinates of the device at flat position `pos`.
  std::vector<int64_t> coords(int64_t pos) const;
  // `names` reordered as they appear in the mesh (the order types print in).
  AxisNames in_mesh_order(const AxisNames& names) const;
  std::string str() const;  // Mesh('dp': 4, 'tp': 2, axis_types=(Explicit, Explicit))
};
using MeshPtr = std::shared_ptr<Mesh>;  // shared_ptr<const> cannot be a pybind holder

// Raises ValueError for empty/duplicate names or sizes not matching devices.
MeshPtr make_mesh_checked(AxisNames names, std::vector<int64_t> sizes,
                          std::vector<AxisType> types, std::vector<int> device_ids);

}  // namespace meshsim
