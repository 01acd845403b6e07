// meshsim._core: the C++ core as a Python extension. Each area binds itself.
#include "convert.h"
#include "meshsim/core/runtime_error.h"
#include "meshsim/ir/trace.h"
#include "meshsim/primitives/families.h"
#include "meshsim/runtime/hooks.h"

namespace meshsim {
namespace py = pybind11;

void init_arrays(py::module_& m);
void init_tracing(py::module_& m);
void init_dtypes(py::module_& m);
void init_mapping(py::module_& m);
void init_autodiff(py::module_& m);
void init_sharding(py::module_& m);
void init_callbacks(py::module_& m);

void init_dtypes(py::module_& m) {
  m.def("promote_types", [](const py::handle& a, bool a_weak, const py::handle& b, bool b_weak) {
    TypedDType r = promote_types({py_convert::to_dtype(a), a_weak}, {py_convert::to_dtype(b), b_weak});
    return py::make_tuple(py_convert::to_numpy_dtype(r.dtype), r.weak);
  });
  m.def("canonicalize_dtype", [](const py::handle& d) {
    return py_convert::to_numpy_dtype(canonicalize_dtype(py_convert::to_dtype(d)));
  });
  m.def("set_x64_enabled", &set_x64_enabled);
  m.def("set_strict_promotion", &set_strict_promotion);
  // jax.dtypes.TypePromotionError, a ValueError subclass.
  static py::handle promotion_error = py::exception<TypePromotionError>(m, "TypePromotionError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const TypePromotionError& e) {
      PyErr_SetString(promotion_error.ptr(), e.what());
    }
  });
  m.def("x64_enabled", &x64_enabled);
}

}  // namespace meshsim

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  using namespace meshsim;
  m.doc() = "meshsim C++ core";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const meshsim::UnexpectedTracerError& e) {
      py::object type = py::module_::import("meshsim._src.errors").attr("UnexpectedTracerError");
      PyErr_SetString(type.ptr(), e.what());
    } catch (const meshsim::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const meshsim::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const meshsim::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const meshsim::NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const meshsim::NameError& e) {
      PyErr_SetString(PyExc_NameError, e.what());
    } catch (const meshsim::JaxRuntimeError& e) {
      py::object type = py::module_::import("meshsim._src.errors").attr("JaxRuntimeError");
      PyErr_SetString(type.ptr(), e.what());
    }
  });
  install_runtime_hooks();
  register_all_primitives();
  init_dtypes(m);
  init_arrays(m);
  init_tracing(m);
  init_mapping(m);
  init_autodiff(m);
  init_sharding(m);
  init_callbacks(m);
}
