#include "dtensor/ops/einsum_strategy.h"

#include <algorithm>

#include "dtensor/base/debug_check.h"

namespace dtensor {
namespace {

// The position of `loop` among `dims`, or -1.
int64_t DimOfLoop(const std::vector<int>& dims, int loop) {
  auto it = std::find(dims.begin(), dims.end(), loop);
  return it == dims.end() ? -1 : it - dims.begin();
}

bool Contains(const std::vector<int>& values, int value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

DimStrategy AllReplicate(const EinsumSpec& spec) {
  DimStrategy c;
  c.inputs.assign(spec.loops.inputs.size(), Placement::Replicate());
  c.outputs.assign(spec.loops.outputs.size(), Placement::Replicate());
  return c;
}

}  // namespace

std::vector<DimStrategy> EinsumDimStrategies(const EinsumSpec& spec,
                                             absl::Span<const bool> present) {
  const LoopDims& loops = spec.loops;
  DT_DCHECK(present.size() == loops.inputs.size());
  DT_DCHECK(spec.contraction.empty() ||
            spec.contraction.size() == loops.outputs.size());
  std::vector<DimStrategy> options = {AllReplicate(spec)};
  for (int l = 0; l < spec.num_loops; ++l) {
    bool any_input = false;
    for (size_t i = 0; i < loops.inputs.size(); ++i) {
      any_input |= present[i] && DimOfLoop(loops.inputs[i], l) >= 0;
    }
    int outputs_with_loop = 0;
    for (const std::vector<int>& out : loops.outputs) {
      outputs_with_loop += DimOfLoop(out, l) >= 0;
    }
    const bool free_loop =
        outputs_with_loop == static_cast<int>(loops.outputs.size());
    const bool contracted = outputs_with_loop == 0;
    if (!any_input || !(free_loop || contracted)) continue;
    if (contracted && spec.contraction.empty()) continue;
    DimStrategy c = AllReplicate(spec);
    for (size_t i = 0; i < loops.inputs.size(); ++i) {
      if (!present[i]) continue;
      const int64_t d = DimOfLoop(loops.inputs[i], l);
      if (d >= 0) {
        c.inputs[i] = Placement::Shard(d);
      } else if (contracted &&
                 Contains(spec.contraction_partners, static_cast<int>(i))) {
        c.inputs[i] = Placement::Partial(ReduceOp::kSum);
      }
    }
    for (size_t j = 0; j < loops.outputs.size(); ++j) {
      c.outputs[j] = contracted
                         ? Placement::Partial(spec.contraction[j])
                         : Placement::Shard(DimOfLoop(loops.outputs[j], l));
    }
    options.push_back(std::move(c));
  }
  for (const EinsumSpec::PartialRule& rule : spec.partial_rules) {
    bool any_present = false;
    for (int i : rule.inputs) any_present |= present[i];
    if (!any_present) continue;
    for (ReduceOp op : rule.ops) {
      DimStrategy c = AllReplicate(spec);
      for (int i : rule.inputs) {
        if (present[i]) c.inputs[i] = Placement::Partial(op);
      }
      for (Placement& out : c.outputs) out = Placement::Partial(op);
      options.push_back(std::move(c));
    }
  }
  return options;
}

absl::StatusOr<std::vector<OpStrategy>> EinsumStrategies(
    const StrategyContext& ctx, const EinsumSpec& spec) {
  absl::InlinedVector<bool, 4> present;
  for (size_t i = 0; i < spec.loops.inputs.size(); ++i) {
    present.push_back(i < ctx.inputs.size() && ctx.inputs[i] != nullptr);
  }
  const std::vector<DimStrategy> per_dim = EinsumDimStrategies(spec, present);
  const std::vector<std::vector<DimStrategy>> candidates(ctx.mesh_shape.size(),
                                                         per_dim);
  return CombineMeshDims(ctx, candidates, spec.loops);
}

std::vector<int> BroadcastLoops(absl::Span<const int64_t> shape,
                                absl::Span<const int64_t> out_shape,
                                int first_loop) {
  const int64_t lead = static_cast<int64_t>(out_shape.size()) -
                       static_cast<int64_t>(shape.size());
  DT_DCHECK(lead >= 0);
  std::vector<int> loops(shape.size());
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k) {
    loops[k] = shape[k] == out_shape[k + lead]
                   ? first_loop + static_cast<int>(k + lead)
                   : kNoLoop;
  }
  return loops;
}

}  // namespace dtensor
