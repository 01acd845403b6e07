#include "convert.h"

namespace meshsim::py_convert {

DType to_dtype(const py::handle& obj) {
  py::dtype dt = py::dtype::from_args(py::reinterpret_borrow<py::object>(obj));
  return dtype_from_name(py::str(dt.attr("name")));
}

py::dtype to_numpy_dtype(DType dt) { return py::dtype(std::string(dtype_name(dt))); }

namespace {

bool all_of(const py::sequence& seq, bool (*pred)(const py::handle&)) {
  for (auto item : seq) if (!pred(item)) return false;
  return true;
}
bool is_int(const py::handle& h) {
  return (py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h)) ||
         py::isinstance(h, py::module_::import("numpy").attr("integer"));
}
bool is_str(const py::handle& h) { return py::isinstance<py::str>(h); }
bool is_int_seq(const py::handle& h) {
  return (py::isinstance<py::tuple>(h) || py::isinstance<py::list>(h)) &&
         all_of(py::reinterpret_borrow<py::sequence>(h), is_int);
}
bool is_str_seq(const py::handle& h) {
  return (py::isinstance<py::tuple>(h) || py::isinstance<py::list>(h)) &&
         all_of(py::reinterpret_borrow<py::sequence>(h), is_str);
}

ParamValue to_param(const py::handle& v) {
  if (v.is_none()) return std::monostate{};
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
  if (is_int(v)) return v.cast<int64_t>();
  if (py::isinstance<py::float_>(v)) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<Program>(v)) return v.cast<ProgramPtr>();
  if (py::isinstance<Mesh>(v)) return v.cast<MeshPtr>();
  if (py::isinstance<py::tuple>(v) || py::isinstance<py::list>(v)) {
    auto seq = py::reinterpret_borrow<py::sequence>(v);
    if (is_int_seq(v)) return v.cast<IntList>();
    if (is_str_seq(v)) return v.cast<StrList>();
    if (all_of(seq, is_int_seq)) return v.cast<IntLists>();
    if (all_of(seq, is_str_seq)) return v.cast<std::vector<StrList>>();
    if (all_of(seq, [](const py::handle& h) { return py::isinstance<Program>(h); }))
      return v.cast<ProgramList>();
  }
  py::object np = py::module_::import("numpy");
  if (py::isinstance(v, np.attr("dtype")) || py::isinstance<py::type>(v)) return to_dtype(v);
  throw TypeError("unsupported primitive parameter: " + std::string(py::repr(v)));
}

}  // namespace

Params to_params(const py::dict& d) {
  Params p;
  for (auto [k, v] : d) p.set(k.cast<std::string>(), to_param(v));
  return p;
}

py::object param_to_py(const ParamValue& v) {
  return std::visit(
      [](const auto& x) -> py::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) return py::none();
        else if constexpr (std::is_same_v<T, DType>) return to_numpy_dtype(x);
        else if constexpr (std::is_same_v<T, IntList> || std::is_same_v<T, StrList> ||
                           std::is_same_v<T, ProgramList>)
          return py::tuple(py::cast(x));
        else return py::cast(x);
      },
      v);
}

Value to_value(const py::handle& obj) {
  if (py::isinstance<Array>(obj)) return obj.cast<ArrayPtr>();
  if (py::isinstance<Tracer>(obj)) return obj.cast<TracerPtr>();
  throw TypeError("expected a meshsim Array or tracer, got " +
                  std::string(py::str(py::type::of(obj).attr("__name__"))));
}

py::object from_value(const Value& v) {
  if (auto* a = std::get_if<ArrayPtr>(&v)) return py::cast(*a);
  return py::cast(std::get<TracerPtr>(v));
}

Tensor tensor_from_numpy(const py::array& arr, bool copy) {
  DType dt = to_dtype(arr.dtype());
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  Strides strides(arr.ndim());
  const auto isz = static_cast<py::ssize_t>(itemsize(dt));
  bool aligned = true;
  for (py::ssize_t i = 0; i < arr.ndim(); ++i) {
    strides[i] = arr.strides()[i] / isz;
    aligned &= arr.strides()[i] % isz == 0;
  }
  if (!aligned) return tensor_from_numpy(py::array::ensure(arr, py::array::c_style), copy);
  // Keep the NumPy array alive for as long as any view of it lives.
  auto* keep = new py::object(arr);
  std::shared_ptr<void> owner(keep, [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
  Tensor t = Tensor::wrap(const_cast<void*>(arr.data()), dt, shape, strides, std::move(owner));
  return copy ? t.copy() : t;
}

py::array tensor_to_numpy(const Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  std::vector<py::ssize_t> strides;
  for (int64_t s : t.strides()) strides.push_back(s * itemsize(t.dtype()));
  auto* keep = new std::shared_ptr<Storage>(t.storage());
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  py::array a(to_numpy_dtype(t.dtype()), shape, strides, t.raw(), base);
  // Our arrays are immutable: NumPy gets a read-only view.
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

}  // namespace meshsim::py_convert
