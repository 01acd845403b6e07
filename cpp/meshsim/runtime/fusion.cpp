#include "meshsim/runtime/fusion.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "meshsim/core/cancel.h"
#include "meshsim/runtime/timeline.h"

namespace meshsim {

namespace {

struct RegisteredTile {
  int arity;
  FloatTile tile;
  bool dense_only = false;
};

// Filled while primitives register (at import), read by plans after; the
// map's nodes do not move, so steps keep pointers to the tiles.
std::map<std::string, RegisteredTile>& tiles() {
  static std::map<std::string, RegisteredTile> registry;
  return registry;
}

std::mutex& tiles_mutex() {
  static std::mutex m;
  return m;
}

const RegisteredTile* tile_of(const std::string& name) {
  std::lock_guard<std::mutex> lock(tiles_mutex());
  auto it = tiles().find(name);
  return it == tiles().end() ? nullptr : &it->second;
}

// The shape of an equation that can join a run: one float32 result, every
// operand float32 of that shape; nullptr otherwise.
const Shape* fusable_shape(const Program& program, const Equation& e, const RegisteredTile* t) {
  if (!t || e.prim->passes_through || e.outputs.size() != 1 ||
      e.inputs.size() != static_cast<size_t>(t->arity))
    return nullptr;
  const Aval& out = program.avals[e.outputs[0]];
  if (out.dtype != DType::Float32) return nullptr;
  for (int v : e.inputs)
    if (program.avals[v].dtype != DType::Float32 || program.avals[v].shape != out.shape) return nullptr;
  return &out.shape;
}

}  // namespace

void register_float_tile(const std::string& name, int arity, FloatTile tile) {
  std::lock_guard<std::mutex> lock(tiles_mutex());
  tiles()[name] = RegisteredTile{arity, std::move(tile)};
}

void mark_float_tile_dense_only(const std::string& name) {
  std::lock_guard<std::mutex> lock(tiles_mutex());
  tiles().at(name).dense_only = true;
}

bool fusion_enabled() { return !timeline::active(); }

FusionPlan::FusionPlan(const Program& program, const std::vector<int>& last) {
  const size_t n = program.eqns.size();
  start_.assign(n, -1);
  size_t k = 0;
  while (k < n) {
    const RegisteredTile* first = tile_of(program.eqns[k].prim->name);
    const Shape* shape = fusable_shape(program, program.eqns[k], first);
    if (!shape) {
      ++k;
      continue;
    }
    size_t end = k + 1;
    while (end < n) {
      const Shape* next = fusable_shape(program, program.eqns[end], tile_of(program.eqns[end].prim->name));
      if (!next || *next != *shape) break;
      ++end;
    }
    if (end - k >= 2) {
      FusedGroup g;
      g.begin = k;
      g.end = end;
      g.shape = *shape;
      g.size = num_elements(*shape);
      std::map<int, int> id;  // variable -> value id, inputs first
      for (size_t j = k; j < end; ++j)
        for (int v : program.eqns[j].inputs)
          if (!id.count(v)) {
            bool produced_here = false;
            for (size_t i = k; i < j && !produced_here; ++i) produced_here = program.eqns[i].outputs[0] == v;
            if (!produced_here) {
              id[v] = static_cast<int>(g.inputs.size());
              g.inputs.push_back(v);
            }
          }
      for (size_t j = k; j < end; ++j) {
        const Equation& e = program.eqns[j];
        const RegisteredTile* t = tile_of(e.prim->name);
        FusedGroup::Step s{&t->tile, t->arity, {0, 0}, t->dense_only};
        for (int i = 0; i < t->arity; ++i) s.operand[i] = id.at(e.inputs[i]);
        const int v = e.outputs[0];
        id[v] = static_cast<int>(g.inputs.size() + g.steps.size());
        g.steps.push_back(s);
        g.results.push_back(v);
        g.kept.push_back(last[v] >= static_cast<int>(end));
      }
      start_[k] = static_cast<int>(groups_.size());
      groups_.push_back(std::move(g));
    }
    k = end;
  }
}

bool run_fused_group(const FusedGroup& g, const Tensor* const* inputs, Tensor* results) {
  const size_t num_in = g.inputs.size(), num_steps = g.steps.size();
  // Operands from outside in contiguous buffers (a view is packed once,
  // unless a step reads its layout).
  thread_local std::vector<Tensor> packed;
  thread_local std::vector<const float*> base;
  packed.assign(num_in, Tensor());
  base.assign(num_in + num_steps, nullptr);
  for (size_t i = 0; i < num_in; ++i) {
    const Tensor& t = *inputs[i];
    if (!t.defined()) return false;
    if (!t.is_contiguous()) {
      for (const FusedGroup::Step& s : g.steps)
        for (int o = 0; o < s.arity; ++o)
          if (s.dense_only && s.operand[o] == static_cast<int>(i)) return false;
      packed[i] = t.contiguous();
      base[i] = packed[i].data<float>();
    } else {
      base[i] = t.data<float>();
    }
  }
  check_cancelled();
  // Kept results get their buffers; the others live in one tile each.
  thread_local std::vector<float> scratch;
  size_t temporaries = 0;
  for (size_t s = 0; s < num_steps; ++s) {
    if (g.kept[s]) {
      results[s] = Tensor::empty(DType::Float32, g.shape);
      base[num_in + s] = results[s].data<float>();
    } else {
      ++temporaries;
    }
  }
  scratch.resize(temporaries * kFusionTile);
  std::vector<float*> out(num_steps);
  for (size_t s = 0, t = 0; s < num_steps; ++s)
    out[s] = g.kept[s] ? const_cast<float*>(base[num_in + s]) : scratch.data() + (t++) * kFusionTile;
  const float* operands[2];
  for (int64_t start = 0; start < g.size; start += kFusionTile) {
    const int64_t n = std::min(kFusionTile, g.size - start);
    auto at = [&](int id) -> const float* {
      if (id < static_cast<int>(num_in)) return base[id] + start;
      const size_t s = id - num_in;
      return g.kept[s] ? base[id] + start : out[s];
    };
    for (size_t s = 0; s < num_steps; ++s) {
      const FusedGroup::Step& step = g.steps[s];
      for (int o = 0; o < step.arity; ++o) operands[o] = at(step.operand[o]);
      (*step.tile)(operands, g.kept[s] ? out[s] + start : out[s], n);
    }
  }
  return true;
}

}  // namespace meshsim
