// jax.errors.JaxRuntimeError (a RuntimeError): a program that type-checked but
// that XLA would refuse to compile or run, raised when the program runs.
#pragma once
#include <stdexcept>

namespace meshsim {

struct JaxRuntimeError : std::runtime_error { using std::runtime_error::runtime_error; };

}  // namespace meshsim
