#include "meshsim/core/sub_axes.h"

#include <algorithm>
#include <cstdio>

#include "meshsim/core/error.h"

namespace meshsim {

bool is_sub_axis(const std::string& name) { return name.find(":(") != std::string::npos; }

std::string parent_axis(const std::string& name) { return name.substr(0, name.find(":(")); }

AxisPart axis_part(const Mesh& mesh, const std::string& name) {
  const std::string axis = parent_axis(name);
  const int p = mesh.axis_position(axis);
  if (p < 0) fail<ValueError>("axis name '", name, "' is not in the mesh ", mesh.str());
  const int64_t n = mesh.axis_sizes[p];
  if (!is_sub_axis(name)) return {axis, 1, n};
  long long pre = 0, size = 0;
  if (std::sscanf(name.c_str() + axis.size(), ":(%lld)%lld", &pre, &size) != 2 || pre < 1 || size < 1 ||
      n % (pre * size) != 0)
    fail<ValueError>("'", name, "' is no sub-axis of the mesh ", mesh.str());
  return {axis, pre, size};
}

std::string axis_part_name(const Mesh& mesh, const AxisPart& part) {
  if (part.pre == 1 && part.size == mesh.axis_sizes[mesh.axis_position(part.axis)]) return part.axis;
  return part.axis + ":(" + std::to_string(part.pre) + ")" + std::to_string(part.size);
}

AxisNames parent_axes(const AxisNames& names) {
  AxisNames out;
  for (const std::string& a : names)
    if (std::find(out.begin(), out.end(), parent_axis(a)) == out.end()) out.push_back(parent_axis(a));
  return out;
}

int64_t axis_coord(const Mesh& mesh, const std::string& name, const std::vector<int64_t>& coords) {
  const AxisPart part = axis_part(mesh, name);
  const int p = mesh.axis_position(part.axis);
  const int64_t minor = mesh.axis_sizes[p] / (part.pre * part.size);
  return coords[p] / minor % part.size;
}

bool axes_overlap(const Mesh& mesh, const std::string& a, const std::string& b) {
  if (parent_axis(a) != parent_axis(b)) return false;
  const AxisPart x = axis_part(mesh, a), y = axis_part(mesh, b);
  // Digits [pre, pre * size) as ranges of the axis's major-to-minor product.
  return x.pre < y.pre * y.size && y.pre < x.pre * x.size;
}

bool overlaps_any(const Mesh& mesh, const std::set<std::string>& used, const std::string& name) {
  for (const std::string& u : used)
    if (axes_overlap(mesh, u, name)) return true;
  return false;
}

AxisNames joined_sub_axes(const Mesh& mesh, const AxisNames& axes) {
  AxisNames out;
  for (const std::string& a : axes) {
    if (!out.empty() && is_sub_axis(a) && parent_axis(out.back()) == parent_axis(a)) {
      const AxisPart major = axis_part(mesh, out.back()), minor = axis_part(mesh, a);
      if (major.pre * major.size == minor.pre) {
        out.back() = axis_part_name(mesh, {major.axis, major.pre, major.size * minor.size});
        continue;
      }
    }
    out.push_back(a);
  }
  return out;
}

AxisNames unused_axes(const Mesh& mesh, const AxisNames& axes) {
  AxisNames out;
  for (size_t k = 0; k < mesh.axis_names.size(); ++k) {
    const std::string& axis = mesh.axis_names[k];
    std::vector<AxisPart> parts;
    for (const std::string& a : axes)
      if (parent_axis(a) == axis) parts.push_back(axis_part(mesh, a));
    std::sort(parts.begin(), parts.end(), [](const AxisPart& x, const AxisPart& y) { return x.pre < y.pre; });
    int64_t at = 1;  // the pre-size of the next digit not yet used
    for (const AxisPart& p : parts) {
      if (p.pre > at) out.push_back(axis_part_name(mesh, {axis, at, p.pre / at}));
      at = p.pre * p.size;
    }
    if (at < mesh.axis_sizes[k]) out.push_back(axis_part_name(mesh, {axis, at, mesh.axis_sizes[k] / at}));
  }
  return out;
}

std::vector<AxisNames> axes_of_parts(const Mesh& mesh, const AxisNames& axes, const std::vector<int64_t>& sizes,
                                     size_t* placed) {
  std::vector<AxisNames> parts(sizes.size());
  size_t k = 0, whole = 0;
  int64_t rest = sizes.empty() ? 1 : sizes[0];
  for (const std::string& name : axes) {
    AxisPart a = axis_part(mesh, name);
    bool done = false;
    while (!done) {
      while (rest == 1 && k + 1 < sizes.size()) rest = sizes[++k];
      if (rest % a.size == 0) {
        parts[k].push_back(axis_part_name(mesh, a));
        rest /= a.size;
        done = true;
      } else if (rest > 1 && a.size % rest == 0) {
        parts[k].push_back(axis_part_name(mesh, {a.axis, a.pre, rest}));
        a = {a.axis, a.pre * rest, a.size / rest};
        rest = 1;
        if (k + 1 == sizes.size()) break;
      } else {
        break;
      }
    }
    if (!done) break;
    ++whole;
  }
  if (placed) *placed = whole;
  return parts;
}

}  // namespace meshsim
