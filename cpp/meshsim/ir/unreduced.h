// Pending reductions in types (Aval::unreduced, JAX's {U:x}; Aval::reduced,
// {R:x}): the rules primitives declare for them (Primitive::ur_rule), with
// JAX's texts. An unreduced value is the sum of the devices' blocks along its
// unreduced axes, so only primitives linear in it accept it; a reduced value
// holds equal blocks and differs from a replicated one only under autodiff.
#pragma once
#include <string>
#include <utility>

#include "meshsim/ir/primitive.h"

namespace meshsim {

using UrAxes = std::pair<AxisNames, AxisNames>;  // (unreduced, reduced) of every output
using UrRule = std::function<UrAxes(const Avals& in, const Params& params)>;

// The axes a parameter names (absent, None or empty: none).
AxisNames named_axes_param(const Params& params, const std::string& name);
// Python's spelling of a set of axes: frozenset({'x', 'y'}).
std::string py_axis_set(const AxisNames& axes);

// The reduced axes every operand with some agrees on (JAX's default rule):
// operands reduced over different axes, or sharded over an axis another
// operand is reduced on, raise ShardingTypeError.
AxisNames common_reduced(const Avals& in);
// JAX's default: an unreduced operand raises NotImplementedError naming
// `name`; reduced axes follow common_reduced.
UrAxes default_ur_rule(const std::string& name, const Avals& in);

// Rules declared by primitives linear in their operand(s):
UrRule keep_operand_ur(size_t operand = 0);  // as the operand (transpose, reshape, reduce_sum, ...)
UrAxes add_ur_rule(const Avals& in, const Params& params);  // both unreduced alike, or neither
UrAxes mul_ur_rule(const Avals& in, const Params& params);   // unreduced times reduced

}  // namespace meshsim
