// The params of `while` and `scan` read once, and the control-flow
// primitives' batching rules (control_flow_batching.cpp), registered with
// the primitives in control_flow.cpp.
#pragma once
#include "meshsim/ir/primitive.h"

namespace meshsim {

struct WhileParams {
  ProgramPtr cond, body;
  size_t cond_nconsts, body_nconsts;
  explicit WhileParams(const Params& p)
      : cond(p.get<ProgramPtr>("cond_jaxpr")),
        body(p.get<ProgramPtr>("body_jaxpr")),
        cond_nconsts(p.get<int64_t>("cond_nconsts")),
        body_nconsts(p.get<int64_t>("body_nconsts")) {}
};

struct ScanParams {
  ProgramPtr body;
  int64_t length;
  size_t num_consts, num_carry;
  bool reverse;
  explicit ScanParams(const Params& p)
      : body(p.get<ProgramPtr>("jaxpr")),
        length(p.get<int64_t>("length")),
        num_consts(p.get<int64_t>("num_consts")),
        num_carry(p.get<int64_t>("num_carry")),
        reverse(p.get<bool>("reverse")) {}
};

Batched cond_batch(const BatchArgs& a);
Batched while_batch(const BatchArgs& a);
Batched scan_batch(const BatchArgs& a);

}  // namespace meshsim
