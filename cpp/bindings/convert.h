// Conversions between Python objects and core types, shared by the bindings.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "meshsim/ir/trace.h"

namespace meshsim::py_convert {
namespace py = pybind11;

DType to_dtype(const py::handle& obj);      // numpy dtype, scalar type or name
py::dtype to_numpy_dtype(DType dt);
Params to_params(const py::dict& d);
py::object param_to_py(const ParamValue& v);
Value to_value(const py::handle& obj);     // Array or Tracer, else TypeError
py::object from_value(const Value& v);
// A copy of `arr`'s values, except for read-only views of our own tensors,
// which cannot change and are shared.
Tensor tensor_from_numpy(const py::array& arr);
py::array tensor_to_numpy(const Tensor& t);  // read-only zero-copy view

}  // namespace meshsim::py_convert
