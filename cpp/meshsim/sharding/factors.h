// Building blocks of the primitives' factor maps (ir/primitive.h `FactorMap`,
// what sharding propagation over Auto axes flows through, as Shardy's
// operation sharding rules relate dimensions). Each primitive sets its own
// `factors` where it is registered (primitives/); the maps several families
// share are built here.
#pragma once
#include <optional>

#include "meshsim/ir/primitive.h"

namespace meshsim {

using FactorRule = std::function<std::optional<FactorMap>(const Avals&, const Params&, const Avals&)>;

// A map with every dimension unrelated (kNoFactor), to be filled in.
FactorMap blank_factors(const Avals& in, const Avals& out);

// Operand 0's dimensions keep their factor in every result, except `whole`
// dims (computed whole) and `reduced` dims (absent from the results;
// contracted when `contracted`, otherwise computed whole). Further operands
// of operand 0's shape (sort's) share its map.
FactorMap keep_dims_factors(const Avals& in, const Avals& out, const IntList& whole,
                            const IntList& reduced, bool contracted);

// Reductions over the dims listed in param `axes`: contracted (partial
// results combined by the local plan) or computed whole.
FactorRule reduced_axes_factors(bool contracted);
// The dims listed in int-list param `param` (or the one dim of int param
// `param` when `single`) are computed whole; the rest pass through.
FactorRule whole_dims_factors(std::string param, bool single);

// Dimensions whose size the operation keeps pass through; the others
// (sliced, padded, concatenated, updated) are computed whole. Operands of the
// result's rank share the map (concatenate's, dynamic_update_slice's).
std::optional<FactorMap> same_size_factors(const Avals& in, const Params& params, const Avals& out);

// The identity map of an elementwise primitive: operands of the result's
// shape share its dims, scalars have none; nullopt when shapes differ.
std::optional<FactorMap> elementwise_factors(const Avals& in, const Avals& out);

}  // namespace meshsim
