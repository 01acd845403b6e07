#include "meshsim/ir/primitive.h"

#include <map>
#include <mutex>

#include "meshsim/primitives/families.h"
#include "meshsim/sharding/rules.h"

namespace meshsim {
namespace {

std::map<std::string, Primitive>& table() {
  static std::map<std::string, Primitive> t;
  return t;
}

void ensure_registered() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto* register_family : kPrimitiveFamilies) {
      std::map<std::string, Primitive> before;
      if (register_family == register_elementwise_primitives) before.swap(table());
      register_family();
      if (register_family == register_elementwise_primitives) {
        // Everything the elementwise family registers gets the elementwise sharding defaults.
        for (auto& [name, prim] : table()) prim.elementwise = true;
        table().merge(before);
      }
    }
    install_sharding_rules(table());
  });
}

}  // namespace

void register_primitive(Primitive prim) {
  std::string name = prim.name;
  table()[name] = std::move(prim);
}

const Primitive& primitive(const std::string& name) {
  ensure_registered();
  auto it = table().find(name);
  if (it == table().end()) fail<NotImplementedError>("unknown primitive '", name, "'");
  return it->second;
}

std::vector<std::string> primitive_names() {
  ensure_registered();
  std::vector<std::string> names;
  for (const auto& [k, v] : table()) names.push_back(k);
  return names;
}

namespace {
double nbytes(const Avals& avals) {
  double n = 0;
  for (const Aval& a : avals) n += static_cast<double>(num_elements(a.shape)) * itemsize(a.dtype);
  return n;
}
}  // namespace

Cost memory_cost(const Avals& in, const Avals& out) { return {0, nbytes(in) + nbytes(out)}; }

Cost cost_of(const Primitive& prim, const Avals& in, const Params& params, const Avals& out) {
  if (prim.cost) return prim.cost(in, params, out);
  if (prim.vjp_split || prim.array_kernel) return {};
  Cost c = memory_cost(in, out);
  if (prim.elementwise)
    for (const Aval& a : out) c.flops += static_cast<double>(num_elements(a.shape));
  return c;
}

Aval like(const Aval& in, Shape shape, DType dtype, bool weak_type) {
  Aval a;
  a.shape = std::move(shape);
  a.dtype = dtype;
  a.weak_type = weak_type;
  a.vma = in.vma;
  return a;
}

}  // namespace meshsim
