#ifndef DTENSOR_TOOLS_EXPLAIN_COMMAND_H_
#define DTENSOR_TOOLS_EXPLAIN_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/types/span.h"

namespace dtensor {

// `dtensor explain --model llama --config <name or JSON file>
//                  --plan <plan file> --mesh dp=64,tp=8 [--batch B]
//                  [--seq S] [--dtype bf16] [--bandwidth GBps,...]
//                  [--latency us,...] [--rank R] [--json]`
// Runs one training step (forward, backward, AdamW update) of the model in
// metadata-only mode (tools/explain.h) and prints, per module, parameter and
// activation layouts and the collectives it issues forward and backward;
// totals per phase and per step; memory per rank; warnings (large gathers,
// uneven shards). --config is a shipped config ("tiny", "1b", "8b", "70b",
// "405b") or a JSON file of LlamaConfig fields. --batch defaults to the size
// of the plan's dp mesh dim (1 without one), --seq to the config's
// max_seq_len, --dtype to bf16, --rank to 0. --json prints the report as one
// JSON object (tools/explain_format.h, docs/explain.md). Returns kExitOk;
// kExitUsage after a one-line error for bad arguments (unknown config, bad
// JSON, a plan that does not fit the mesh or model, ...).
int RunExplainCommand(absl::Span<const std::string> args, std::ostream& out,
                      std::ostream& err);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_EXPLAIN_COMMAND_H_
