// The propagation pass's internals (sharding/propagation.cpp and the units of
// the op families' rules beside it); not part of the sharding layer's interface.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "meshsim/sharding/propagation.h"

namespace meshsim::propagation {

inline bool is_prefix(const AxisNames& a, const AxisNames& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

inline int64_t elements(const Aval& a) { return num_elements(a.shape); }

// One equation seen by propagation: its factor map and, for each operand and
// result, the variable it is.
struct Site {
  const Equation* eqn;  // null: a link between a control-flow value and its sub-program's
  FactorMap map;
  size_t num_in;                            // operands (then results)
  std::vector<int> in_vars, out_vars;       // the equation's operands and results
  std::vector<int> vars;                    // operands, then results, when the map applies
  std::vector<const std::vector<int>*> dims;  // their factor per dimension
  std::vector<bool> permutation;            // per factor: see add_permutation_factors
  // Dims made of several factors, major first (see add_reshape_parts): per
  // (place among operands then results, dim), the factors and their sizes.
  std::map<std::pair<size_t, size_t>, std::pair<std::vector<int>, std::vector<int64_t>>> compound;
};

// propagation_resizing.cpp: the factors reshapes, pads, slices and concatenates add.
void add_reshape_parts(const Equation& e, const Avals& in, const Avals& out, Site& s);
void add_permutation_factors(const Equation& e, const Avals& in, const Avals& out, Site& s);

// A compound dim's part (see add_reshape_parts).
struct DimPart {
  int factor;
  int64_t size;
  AxisNames axes;  // of the dim's layout, those falling to this factor
};

class Propagator {
 public:
  // Control-flow equations' sub-programs join the one propagation (Shardy
  // propagates through a while's body and a conditional's branches): their
  // values get ids after the program's, and link sites tie each to the
  // operand or result it is.
  Propagator(const Program& program, const Mesh& mesh);

  void fix(int v, const Spec& spec);

  // Shardy's op-priority propagation: first only through the operations
  // that pass every factor through (elementwise ones, reshapes, transposes
  // and the edges between a call and its sub-programs), to a fixed point;
  // then through every operation. (Shardy's middle stage, every operation's
  // pass-through factors, is not modelled: docs/auto_sharding.md.)
  void run();

  static bool passes_through(const Site& s);

  ShardingPlan plan() const { return plan_of(0); }

 private:
  // One program among those propagated together: its values are ids
  // [offset, offset + its avals).
  struct Scope {
    const Program* program;
    int offset;
    std::vector<size_t> sites;  // per equation
    // Per control-flow equation: how it calls its sub-programs, and their scopes.
    std::map<size_t, std::pair<ControlFlowLinks, std::vector<size_t>>> calls;
  };

  // propagation.cpp: scopes, sites and resolving factors.
  size_t add_scope(const Program& program);

  // The plan of scope `id`'s program.
  ShardingPlan plan_of(size_t id) const;
  std::vector<Spec> values(const std::vector<int>& vars) const;

  // Whether `s`'s primitive runs on blocks with its operands laid out as
  // `operands` and its results as `results`: its local plan takes them as
  // they are and combines nothing.
  bool runs_on_blocks(const Site& s, const std::vector<Spec>& operands, const std::vector<Spec>& results) const;
  // `s`'s primitive's local plan for these layouts; nullopt when it has none.
  std::optional<LocalPlan> local_plan(const Site& s, const std::vector<Spec>& operands,
                                      const std::vector<Spec>& results) const;
  // Whether local plan `lp` uses the operands laid out as `operands`.
  static bool takes_operands(const std::optional<LocalPlan>& lp, const std::vector<Spec>& operands);

  // A sharding constraint (a view of its operand in a fixed layout:
  // Primitive::result_is_operand_view and fixed_result_specs) on a value an
  // equation computes and nothing else reads lays that value out as it says,
  // as Shardy sets a constraint's sharding on the value it constrains: the
  // equation computes in that layout, whatever its operands' layouts.
  // (`sin(x)` with `x: P('X')` constrained to `P(None, 'Y')` computes the sine
  // on `P(None, 'Y')` blocks, not on `P('X', 'Y')` ones gathered after.)
  void fix_constrained_operands(const Program& program, int offset);

  // Results whose layout the primitive itself decides (Primitive::fixed_result_specs).
  void fix_results(const Equation& e, const std::vector<int>& outputs);
  int64_t entry_size(const AxisNames& axes) const;

  // The factors of dim `d` of `s`'s value `t` laid out as `layout`: one, or a
  // compound dim's parts, each taking the axes that divide it, the next
  // part's only once it is split whole.
  std::vector<DimPart> parts_of(const Site& s, size_t t, size_t d, const AxisNames& layout) const;

  // The layout of dim `d` of `s`'s value `t` from its factors' layouts (a
  // compound dim's: its parts' axes in order while the parts before are
  // split whole).
  AxisNames joined(const Site& s, size_t t, size_t d, const std::vector<AxisNames>& fs) const;

  // The layout of every factor of `s` from its values' current layouts;
  // `planning`: for computing on (operands may be cut over axes no value of
  // `s` uses, which propagation does not give the values).
  // `results_only`: the layouts of the factors the results have, as Shardy
  // gives a result tensor its factors' axes: a contracted factor, which no
  // result has, takes no axis from them.
  std::vector<AxisNames> resolve(const Site& s, bool planning = false, bool results_only = false) const;

  // For computing on: each factor of `s`'s results takes the axes the
  // results' values have for it, other factors giving those axes up. Local
  // plans compute a result in the layout its operands' blocks give it, so
  // operands are laid out to the results' values, as XLA's partitioner
  // reshards operands to the layout propagation gave the result. (A
  // factor's weight can grow after its result was laid out: a broadcast's
  // bias dim, once its result is split along it, may outweigh the dim that
  // took the axis first.)
  void take_results_layouts(const Site& s, std::vector<AxisNames>& fs) const;

  // A gather whose partial results are all-reduced (its indexed dims split)
  // and whose result is split along a pass-through dim over axes the indexed
  // dims hold computes that dim over mesh axes no factor uses (in mesh
  // order, into no more blocks than the result's layout has), as XLA's
  // partitioner does: the all-reduce moves smaller blocks, which a
  // collective-permute then takes to the result's layout.
  void pass_through_over_idle_axes(const Site& s, std::vector<AxisNames>& fs) const;

  // The layouts `s`'s results are computed in when their factors resolve
  // (`fs`) other than their values have them and the primitive's local plan
  // would not take the operands as laid out for them (axes a contracted
  // factor kept: a gather's result computed over its operand's pass-through
  // axes, its partial results all-reduced, then sliced to its layout);
  // empty when nothing differs.
  std::vector<Spec> resolved_results(const Site& s, const std::vector<AxisNames>& fs) const;

  // Open values of `s` gain the axes their factors' layouts add.
  bool apply(const Site& s, bool pass_through_only = false);

  // propagation_calls.cpp: control flow's sub-programs.

  // The sub-programs of equation `k` of scope `id` join the propagation, each
  // of their inputs and outputs linked to the operand or result it is.
  void add_call(size_t id, size_t k, ControlFlowLinks links, const std::vector<int>& in_vars,
                const std::vector<int>& out_vars);

  // A site tying value `a` to value `b` dim by dim; a stacked one has a
  // leading dim more, which the other does not have.
  void add_link(int a, int b, bool a_stacked, bool b_stacked = false);

  // A control-flow equation: its operands are used laid out as the
  // sub-programs' inputs they become (a carry as the body's input, which
  // the body's result is brought back to on every iteration); its results
  // come out as the carries or the sub-programs' outputs. When its local
  // plan takes them so, it runs as one primitive on each device's blocks;
  // otherwise its sub-programs run partitioned (`sub`).
  void plan_call(const Site& s, const ControlFlowLinks& links, const std::vector<size_t>& scopes,
                 std::vector<Spec>& ops, std::vector<Spec>& made, std::vector<SubProgramPlan>& sub) const;

  // propagation_contraction.cpp: contracted factors.

  // A contracted factor that an operand splits over axes other factors use,
  // while some mesh axes split nothing: XLA moves that operand's blocks to
  // pieces split over the idle axes (a collective-permute) and either
  // gathers them (runtime/interpreter.cpp `gathered_through_idle_axes`) or,
  // when it moves no more, computes on them and all-reduces the partial
  // results over the idle axes. Those axes in the latter case, none otherwise.
  AxisNames split_over_idle_axes(const Site& s, int f, const std::vector<AxisNames>& fs, int64_t size) const;

  // Whether `spec` lays any dim out over one of `axes`.
  static bool uses_any(const Spec& spec, const AxisNames& axes);

  // Bytes of value `v`'s block were its dims laid out as the factors say
  // (`t`: its place in the site).
  int64_t block_bytes(const Site& s, size_t t, const std::vector<AxisNames>& fs) const;

  // A contracted factor sharded as `fs[f]` on operands that are not all laid
  // out so: computed sharded (operands sliced, results all-reduced) or whole
  // (the sharded operands all-gathered). As XLA's partitioner decides it:
  // whole when a result is laid out over the factor's axes or when the
  // operands' layouts leave devices computing the same blocks (some axis
  // splits none of them); otherwise whichever moves fewer bytes.
  // While propagating (`planning` false), an open operand that an equation
  // computes (not a sub-program's input: a loop's carry is tied to its
  // initial value) and that is laid out along the factor over a prefix of
  // its axes, or not at all, does not differ where its other dims leave the
  // other axes free: it gains them, as
  // Shardy gives an open value the compatible axes before the partitioner
  // weighs any move.
  AxisNames contracted_layout(const Site& s, int f, const std::vector<AxisNames>& fs, bool planning) const;

  // XLA's partitioner splits a dot whose result is laid out only along free
  // dims of one operand ("matching", laid out alike there) into groups of
  // devices, one per block of those dims, and computes within each group.
  // The other operand, when it is split over the groups' axes, must first be
  // brought to each group: when it leaves axes unused as many devices' worth
  // as the groups number and one of its dims holds exactly the groups' axes,
  // that dim takes the unused axes instead (a collective-permute); when it
  // leaves none unused, it takes the matching operand's layout of the
  // contracted dim and is replicated otherwise. Within a group the
  // contraction is computed split when both operands then split it alike, or
  // when one splits it over every device of the group while the other is
  // whole there and larger than the group's result; whole otherwise. The
  // layout of contracted factor `f` so (empty: whole), or nullopt where that
  // grouping does not apply or is not modelled (then contracted_layout's own
  // rules decide).
  std::optional<AxisNames> grouped_on_free_dims(const Site& s, int f) const;

  // propagation_resizing.cpp: permutation factors (concatenate, pad, slice, cumulative scans).

  // XLA concatenates along a split dim by moving its axes to another dim
  // whose blocks they divide (an all-to-all of each operand), concatenating
  // the blocks and moving the axes back (an all-to-all of the result), rather
  // than gathering the operands: `operands` and the `result` computed get
  // the concatenated dim's axes on the first such dim.
  void retile_concatenated(const Site& s, std::vector<Spec>& operands, Spec& result) const;

  // `operands` with the dims of permutation factors that the results cannot
  // hold split (their axes do not divide a padded size) laid out as the
  // operands' values are: XLA keeps such a split over blocks of the size
  // rounded up, as a pad's local plan runs it (structural_resizing.cpp).
  std::vector<Spec> kept_uneven(const Site& s, const std::vector<Spec>& operands) const;

  // The layouts `s`'s results are computed in: their values' with the dims
  // of permutation factors whole; empty when nothing differs.
  std::vector<Spec> computed_layouts(const Site& s) const;

  const Mesh& mesh_;
  Avals avals_;  // every value's type, the sub-programs' after the program's
  std::vector<Spec> spec_;
  std::vector<bool> fixed_;
  std::vector<bool> computed_;  // per value: an equation's result (not a program's input)
  std::vector<Site> sites_;
  std::vector<Scope> scopes_;
};

}  // namespace meshsim::propagation
