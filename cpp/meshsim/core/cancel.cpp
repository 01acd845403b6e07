#include "meshsim/core/cancel.h"

namespace meshsim {

namespace {
thread_local CancelToken* t_token = nullptr;
}

Cancelled::Cancelled()
    : std::runtime_error("CANCELLED: the program was interrupted (KeyboardInterrupt) before it finished") {}

CancelScope::CancelScope(CancelToken* token) : saved_(t_token) { t_token = token; }
CancelScope::~CancelScope() { t_token = saved_; }

CancelToken* current_cancel_token() { return t_token; }

}  // namespace meshsim
