// Sub-axes of mesh axes, as Shardy names them: `Y:(2)2` is the part of axis
// Y of size 2 whose more major parts have 2 values (pre-size 2), so on a Y of
// size 4, `Y:(1)2` and `Y:(2)2` are its major and minor halves. Sharding
// propagation splits an axis so where a reshape's part holds only some of its
// devices (a dim of 4 over Y of 4 split into (2, 2)); layouts may then name
// them wherever they name axes. Types never carry them: only Auto layouts do.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "meshsim/core/mesh.h"

namespace meshsim {

// A mesh axis or a sub-axis of one: values [pre, pre * size) of the axis's
// major-to-minor digits, i.e. coordinate c of the axis gives
// (c / (axis size / (pre * size))) % size.
struct AxisPart {
  std::string axis;
  int64_t pre = 1, size = 1;
};

// The axis or sub-axis `name` names on `mesh` (a whole axis: pre 1, its size).
// Raises ValueError for a name of no axis of the mesh.
AxisPart axis_part(const Mesh& mesh, const std::string& name);
// The name of `part`: the axis's own when it covers the whole axis.
std::string axis_part_name(const Mesh& mesh, const AxisPart& part);
bool is_sub_axis(const std::string& name);
// The mesh axis `name` is part of (`Y` for `Y:(2)2`).
std::string parent_axis(const std::string& name);
// `names` as whole mesh axes, each once (the axes a collective over them spans).
AxisNames parent_axes(const AxisNames& names);

// The coordinate along (sub-)axis `name` of the device at mesh coordinates `coords`.
int64_t axis_coord(const Mesh& mesh, const std::string& name, const std::vector<int64_t>& coords);

// Whether two (sub-)axes share devices' digits (`Y` and `Y:(1)2` do; `Y:(1)2` and `Y:(2)2` do not).
bool axes_overlap(const Mesh& mesh, const std::string& a, const std::string& b);
bool overlaps_any(const Mesh& mesh, const std::set<std::string>& used, const std::string& name);

// A dim's layout with adjacent sub-axes of one axis, major then minor,
// joined (`Y:(1)2`, `Y:(2)2` -> `Y`).
AxisNames joined_sub_axes(const Mesh& mesh, const AxisNames& axes);

// The (sub-)axes of `mesh` that `axes` leave unused, in mesh order, major first.
AxisNames unused_axes(const Mesh& mesh, const AxisNames& axes);

// The axes of a dim laid out over `axes` that fall to each of its parts of
// `sizes` (a reshape's, major first), as Shardy's reshape rule gives them:
// each part takes axes while they divide what it has left, an axis the part
// holds only some of is split into sub-axes (the part takes the major one,
// the next part the rest). Stops at an axis that neither divides the part
// nor is divided by it; `placed` counts the axes of `axes` placed whole.
std::vector<AxisNames> axes_of_parts(const Mesh& mesh, const AxisNames& axes, const std::vector<int64_t>& sizes,
                                     size_t* placed = nullptr);

}  // namespace meshsim
