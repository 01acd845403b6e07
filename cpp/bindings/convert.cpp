#include "convert.h"

#include <cstring>

namespace meshsim::py_convert {

DType to_dtype(const py::handle& obj) {
  py::dtype dt = py::dtype::from_args(py::reinterpret_borrow<py::object>(obj));
  return dtype_from_name(py::str(dt.attr("name")));
}

// NumPy spells the narrow floats other than float16, and int4/uint4, through
// ml_dtypes, as JAX does.
py::dtype to_numpy_dtype(DType dt) {
  if ((!is_narrow_float(dt) || dt == DType::Float16) && !is_int4(dt))
    return py::dtype(std::string(dtype_name(dt)));
  static py::object* ml_dtypes = new py::object(py::module_::import("ml_dtypes"));
  return py::dtype::from_args(ml_dtypes->attr(dtype_name(dt)));
}

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

namespace {

// Names the capsules that keep our tensors' storage alive under NumPy views.
constexpr const char* kStorageCapsule = "meshsim.storage";

// The storage of `arr` if it is a view of one of our tensors (tensor_to_numpy):
// such views are read-only and NumPy refuses to make them writeable (their
// base exposes no buffer), so the memory cannot change and need not be copied.
std::shared_ptr<Storage> own_storage(const py::array& arr) {
  if (arr.writeable()) return nullptr;
  PyObject* base = py::detail::array_proxy(arr.ptr())->base;
  if (!base || !PyCapsule_CheckExact(base) || !PyCapsule_IsValid(base, kStorageCapsule)) return nullptr;
  return *static_cast<std::shared_ptr<Storage>*>(PyCapsule_GetPointer(base, kStorageCapsule));
}

}  // namespace

Tensor tensor_from_numpy(const py::array& arr) {
  if (!arr.dtype().attr("isnative").cast<bool>())  // JAX's TypeError (device_put's text)
    throw TypeError("Dtype " + py::str(arr.dtype().attr("str")).cast<std::string>() +
                    " is not a valid JAX array type. Only arrays of numeric types are supported by JAX.");
  DType dt = to_dtype(arr.dtype());
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  const auto isz = static_cast<py::ssize_t>(itemsize(dt));
  if (std::shared_ptr<Storage> storage = own_storage(arr)) {
    Strides strides(arr.ndim());
    for (py::ssize_t i = 0; i < arr.ndim(); ++i) strides[i] = arr.strides()[i] / isz;
    return Tensor::wrap(const_cast<void*>(arr.data()), dt, shape, strides, storage);
  }
  // Anything else is copied, as JAX copies: the caller may write to its memory
  // (or to a base a read-only view shares) at any time, even while a
  // dispatched program still reads it. NumPy converts to a C-ordered, aligned
  // array first (a no-op for the common case), so non-contiguous,
  // Fortran-ordered and unaligned inputs all arrive as plain rows.
  auto& api = py::detail::npy_api::get();
  const int flags = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_ |
                    py::detail::npy_api::NPY_ARRAY_FORCECAST_;
  py::dtype native = to_numpy_dtype(dt);
  auto packed = py::reinterpret_steal<py::array>(
      api.PyArray_FromAny_(arr.ptr(), native.release().ptr(), 0, 0, flags, nullptr));
  if (!packed) throw py::error_already_set();
  Tensor t = Tensor::empty(dt, shape);
  if (t.nbytes()) std::memcpy(t.raw(), packed.data(), t.nbytes());
  return t;
}

py::array tensor_to_numpy(const Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  std::vector<py::ssize_t> strides;
  for (int64_t s : t.strides()) strides.push_back(s * itemsize(t.dtype()));
  auto* keep = new std::shared_ptr<Storage>(t.storage());
  py::capsule base(keep, kStorageCapsule, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  py::array a(to_numpy_dtype(t.dtype()), shape, strides, t.raw(), base);
  // Our arrays are immutable: NumPy gets a read-only view.
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

}  // namespace meshsim::py_convert
