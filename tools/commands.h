#ifndef DTENSOR_TOOLS_COMMANDS_H_
#define DTENSOR_TOOLS_COMMANDS_H_

#include "tools/subcommand.h"

namespace dtensor {

// The entry points of the dtensor tool's subcommands, listed in
// tools/dtensor_main.cc. Each is a SubcommandFn (tools/subcommand.h): it gets
// the arguments after the subcommand's name, writes its results to `out` and
// errors to `err`, and returns the exit status. Each is defined in
// tools/<name>_command.cc, a library of its own (//tools:<name>_command).

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
SubcommandFn RunExplainCommand;

// `dtensor layout --mesh 4x2 --shape 18,2 --placements "S(0),S(0)"
//                 [--dtype f32] [--json]`
// Prints, for every rank of the mesh (row-major), its mesh coordinate, local
// shape, global offset and replica index, then a picture of which ranks hold
// which block (1-D and 2-D tensors). With --json prints one line:
// {"mesh":[4,2],"shape":[18,2],"placements":"S(0),S(0)","ranks":[{"rank":0,
// "coord":[0,0],"local_shape":[3,2],"global_offset":[0,0]},...]}
// Returns kExitOk; kExitUsage after a one-line error for bad arguments.
SubcommandFn RunLayoutCommand;

// `dtensor plan --mesh 2x2 --shape 8,8 [--dtype f32] --from "S(0),S(1)"
//               --to "S(1),S(0)" [--bandwidth GBps,...] [--latency us,...]
//               [--verify] [--json]`
// Prints the cheapest redistribution plan: each step (kind, mesh dims, tensor
// dims, layout after it, bytes received per rank, cost) and the total.
// --bandwidth and --latency set each mesh dim's link (one value per mesh dim,
// or one for all); --latency is the per-hop latency. --verify runs the plan on
// in-process ranks with random data and compares every rank's result with
// the reference slice of the full tensor. --json prints one line:
// {"steps":[{"kind":"all_gather","mesh_dims":[1],"after":"S(1),R",
// "bytes_per_rank":256,"cost_us":8.3}],"total_cost_us":...,
// "collectives":<non-local steps>,"verified":true} ("verified" only with
// --verify). Returns kExitOk; 1 when verification fails; kExitUsage after a
// one-line error for bad arguments.
SubcommandFn RunPlanCommand;

// `dtensor propagate --mesh 4 --op mm --in "12x8:S(0)" --in "8x4:R"
//                    [--arg dims=0,1 ...] [--dtype f32] [--bandwidth GBps,...]
//                    [--latency us,...] [--json]`
// `dtensor propagate --list`
// Propagates one op call in metadata-only mode and prints the chosen
// strategy, each input's redistribution (steps and cost), and the output
// shapes and layouts. Each --in is "SHAPE:LAYOUT[:DTYPE]": sizes separated
// by 'x' (empty for a 0-d tensor), one placement per mesh dim as for
// `dtensor plan`, and a dtype overriding --dtype (default f32). --arg sets a
// named argument of the op (see --list). --json prints one line:
// {"op":"mm","output":{"shape":[12,4],"placements":"S(0)"},
//  "redistributions":[{"input":0,"from":"S(0)","to":"S(0)","steps":[...],
//  "cost_us":0},...],"collectives":{"all_gather":0,"all_reduce":0,
//  "reduce_scatter":0,"all_to_all":0,"permute":0},"cost_us":0}
// with "outputs" (every output) after "output" for ops with several outputs,
// and "kernel_collectives" after "redistributions" for ops whose kernel
// communicates. Returns kExitOk; kExitUsage after a one-line error for bad
// arguments (an unknown op, a malformed --in, a call the op rejects).
SubcommandFn RunPropagateCommand;

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_COMMANDS_H_
