#include "dtensor/collectives/call_checks.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/argument_checks.h"

namespace dtensor {
namespace {

std::string SizesText(absl::Span<const int64_t> sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

std::string PairsText(absl::Span<const PermutePair> pairs) {
  return absl::StrCat(
      "[",
      absl::StrJoin(pairs, ", ",
                    [](std::string* out, const PermutePair& pair) {
                      absl::StrAppend(out, pair.src, "->", pair.dst);
                    }),
      "]");
}

std::string DTypeText(const Tensor& tensor) {
  return absl::StrCat("dtype=", std::string(DTypeName(tensor.dtype())));
}

// `input` and `output` are defined on the device and share a dtype.
absl::Status CheckInputOutput(const Tensor& input, const Tensor& output,
                              const CallSite& site, absl::string_view op) {
  DT_RETURN_IF_ERROR(CheckTensor(input, "input", site.device, op));
  DT_RETURN_IF_ERROR(CheckTensor(output, "output", site.device, op));
  return CheckSameDType(input, output, op);
}

// Piece sizes (called `sizes_name`) given in full, or equal pieces of dim
// `dim` (called `dim_name`) of `tensor` (called `tensor_name`), which they
// must divide; either way adding up to that dim's size.
struct PiecesOfDim {
  absl::string_view sizes_name;
  const Tensor& tensor;
  absl::string_view tensor_name;
  int64_t dim;
  absl::string_view dim_name;
};
absl::StatusOr<std::vector<int64_t>> PiecesOf(absl::Span<const int64_t> sizes,
                                              const PiecesOfDim& of,
                                              const CallSite& site,
                                              absl::string_view op) {
  const int64_t total = of.tensor.size(of.dim);
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> all,
                      SplitPieceSizes(sizes, total, site.size, op));
  if (SumOf(all) != total) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", of.sizes_name, " ", SizesText(all), " do not add up to size ",
        total, " of ", of.dim_name, " ", of.dim, " of ", of.tensor_name, " ",
        TensorText(of.tensor)));
  }
  return all;
}

// `sizes` (given or all equal to this rank's) give this rank the size that
// `piece` (called `name`) has along `dim`.
absl::StatusOr<std::vector<int64_t>> PiecesAround(
    absl::Span<const int64_t> sizes, const Tensor& piece, int64_t dim,
    absl::string_view name, const CallSite& site, absl::string_view op) {
  DT_ASSIGN_OR_RETURN(
      std::vector<int64_t> all,
      CompletePieceSizes(sizes, site.size, piece.size(dim), op));
  if (all[site.rank] != piece.size(dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": sizes ", SizesText(all), " give rank ", site.rank, " size ",
        all[site.rank], " but its ", name, " ", TensorText(piece), " has ",
        piece.size(dim), " along dim ", dim));
  }
  return all;
}

// The pairs are in range and no rank sends or receives twice.
absl::Status CheckPermutePairs(absl::Span<const PermutePair> pairs,
                               int64_t size, absl::string_view op) {
  std::vector<bool> sends(size, false);
  std::vector<bool> receives(size, false);
  for (const PermutePair& pair : pairs) {
    DT_RETURN_IF_ERROR(CheckGroupRank(pair.src, size, "src", op));
    DT_RETURN_IF_ERROR(CheckGroupRank(pair.dst, size, "dst", op));
    if (sends[pair.src] || receives[pair.dst]) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": rank ", sends[pair.src] ? pair.src : pair.dst,
                       " ", sends[pair.src] ? "sends" : "receives",
                       " more than once in ", PairsText(pairs)));
    }
    sends[pair.src] = true;
    receives[pair.dst] = true;
  }
  return absl::OkStatus();
}

// What scatter and gather check alike: a valid root; on every rank its
// piece along `dim` (scatter's output, gather's input) of the size the
// complete piece sizes give it; on the root the whole tensor (the other
// one) of the same dtype, the pieces' sum along `dim`, not overlapping.
// Off the root, the whole tensor becomes undefined.
template <typename Args>
absl::Status CheckRootedPieces(Args& args, bool piece_is_output,
                               const CallSite& site, absl::string_view op) {
  Tensor& piece = piece_is_output ? args.output : args.input;
  Tensor& whole = piece_is_output ? args.input : args.output;
  const char* piece_name = piece_is_output ? "output" : "input";
  const char* whole_name = piece_is_output ? "input" : "output";
  DT_RETURN_IF_ERROR(CheckGroupRank(args.root, site.size, "root", op));
  DT_RETURN_IF_ERROR(CheckTensor(piece, piece_name, site.device, op));
  DT_ASSIGN_OR_RETURN(args.dim,
                      NormalizeCollectiveDim(args.dim, piece.dim(), op));
  DT_ASSIGN_OR_RETURN(args.sizes, PiecesAround(args.sizes, piece, args.dim,
                                               piece_name, site, op));
  if (site.rank != args.root) {
    whole = Tensor();
    return absl::OkStatus();
  }
  DT_RETURN_IF_ERROR(CheckTensor(whole, whole_name, site.device, op));
  DT_RETURN_IF_ERROR(CheckSameDType(args.input, args.output, op));
  DT_RETURN_IF_ERROR(
      CheckShape(whole, WithDimSize(piece.shape(), args.dim, SumOf(args.sizes)),
                 whole_name, op));
  return CheckDisjoint(args.input, args.output, op);
}

// The checks of each op (`site` is where the call is made).
struct ArgsChecker {
  const CallSite& site;

  absl::Status operator()(AllReduceArgs& args) const {
    constexpr absl::string_view kOp = "all_reduce";
    DT_RETURN_IF_ERROR(CheckTensor(args.tensor, "tensor", site.device, kOp));
    return CheckReduceDType(args.op, args.tensor.dtype(), kOp);
  }

  absl::Status operator()(AllGatherArgs& args) const {
    constexpr absl::string_view kOp = "all_gather";
    DT_RETURN_IF_ERROR(CheckInputOutput(args.input, args.output, site, kOp));
    DT_ASSIGN_OR_RETURN(
        args.dim, NormalizeCollectiveDim(args.dim, args.input.dim(), kOp));
    DT_ASSIGN_OR_RETURN(args.sizes, PiecesAround(args.sizes, args.input,
                                                 args.dim, "input", site, kOp));
    DT_RETURN_IF_ERROR(
        CheckShape(args.output,
                   WithDimSize(args.input.shape(), args.dim, SumOf(args.sizes)),
                   "output", kOp));
    return CheckDisjoint(args.input, args.output, kOp);
  }

  absl::Status operator()(ReduceScatterArgs& args) const {
    constexpr absl::string_view kOp = "reduce_scatter";
    DT_RETURN_IF_ERROR(CheckInputOutput(args.input, args.output, site, kOp));
    DT_RETURN_IF_ERROR(CheckReduceDType(args.op, args.input.dtype(), kOp));
    DT_ASSIGN_OR_RETURN(
        args.dim, NormalizeCollectiveDim(args.dim, args.input.dim(), kOp));
    DT_ASSIGN_OR_RETURN(
        args.sizes,
        PiecesOf(args.sizes, {"sizes", args.input, "input", args.dim, "dim"},
                 site, kOp));
    DT_RETURN_IF_ERROR(CheckShape(
        args.output,
        WithDimSize(args.input.shape(), args.dim, args.sizes[site.rank]),
        "output", kOp));
    return CheckDisjoint(args.input, args.output, kOp);
  }

  absl::Status operator()(AllToAllArgs& args) const {
    constexpr absl::string_view kOp = "all_to_all";
    const Tensor& input = args.input;
    const Tensor& output = args.output;
    DT_RETURN_IF_ERROR(CheckInputOutput(input, output, site, kOp));
    DT_ASSIGN_OR_RETURN(args.split_dim, NormalizeCollectiveDim(
                                            args.split_dim, input.dim(), kOp));
    DT_ASSIGN_OR_RETURN(
        args.concat_dim,
        NormalizeCollectiveDim(args.concat_dim, input.dim(), kOp));
    if (output.dim() != input.dim()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": output ", TensorText(output), " and input ",
                       TensorText(input), " differ in rank"));
    }
    DT_ASSIGN_OR_RETURN(args.send_sizes, PiecesOf(args.send_sizes,
                                                  {"send sizes", input, "input",
                                                   args.split_dim, "split dim"},
                                                  site, kOp));
    DT_ASSIGN_OR_RETURN(args.recv_sizes,
                        PiecesOf(args.recv_sizes,
                                 {"recv sizes", output, "output",
                                  args.concat_dim, "concat dim"},
                                 site, kOp));
    for (int64_t d = 0; d < input.dim(); ++d) {
      if (d != args.split_dim && d != args.concat_dim &&
          input.size(d) != output.size(d)) {
        return absl::InvalidArgumentError(
            absl::StrCat(kOp, ": input ", TensorText(input), " and output ",
                         TensorText(output), " differ in dim ", d,
                         ", which is neither the split nor the concat dim"));
      }
    }
    return CheckDisjoint(input, output, kOp);
  }

  absl::Status operator()(BroadcastArgs& args) const {
    constexpr absl::string_view kOp = "broadcast";
    DT_RETURN_IF_ERROR(CheckTensor(args.tensor, "tensor", site.device, kOp));
    return CheckGroupRank(args.root, site.size, "root", kOp);
  }

  absl::Status operator()(ScatterArgs& args) const {
    return CheckRootedPieces(args, /*piece_is_output=*/true, site, "scatter");
  }

  absl::Status operator()(GatherArgs& args) const {
    return CheckRootedPieces(args, /*piece_is_output=*/false, site, "gather");
  }

  absl::Status operator()(PermuteArgs& args) const {
    constexpr absl::string_view kOp = "permute";
    DT_RETURN_IF_ERROR(CheckPermutePairs(args.pairs, site.size, kOp));
    const PermutePeers peers = PermutePeersOf(args.pairs, site.rank);
    if (peers.to.has_value()) {
      DT_RETURN_IF_ERROR(CheckTensor(args.input, "input", site.device, kOp));
    } else {
      args.input = Tensor();
    }
    if (peers.from.has_value()) {
      DT_RETURN_IF_ERROR(CheckTensor(args.output, "output", site.device, kOp));
    } else {
      args.output = Tensor();
    }
    // A rank's input and output go to and come from different peers: their
    // shapes and dtypes need not agree.
    if (peers.to.has_value() && peers.from.has_value()) {
      return CheckDisjoint(args.input, args.output, kOp);
    }
    return absl::OkStatus();
  }

  absl::Status operator()(BarrierArgs&) const { return absl::OkStatus(); }

  absl::Status operator()(SendArgs& args) const {
    return CheckPeer(args.tensor, args.dst, "dst", "send", "send to");
  }

  absl::Status operator()(RecvArgs& args) const {
    return CheckPeer(args.tensor, args.src, "src", "recv", "receive from");
  }

  absl::Status CheckPeer(const Tensor& tensor, int64_t peer,
                         absl::string_view name, absl::string_view op,
                         absl::string_view verb) const {
    DT_RETURN_IF_ERROR(CheckTensor(tensor, "tensor", site.device, op));
    DT_RETURN_IF_ERROR(CheckGroupRank(peer, site.size, name, op));
    if (peer == site.rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": rank ", peer, " cannot ", verb, " itself"));
    }
    return absl::OkStatus();
  }
};

// What debug mode compares across ranks (`key`) and shows (`args`).
struct SignatureParts {
  std::string key;
  std::string args;
};

struct ArgsSigner {
  SignatureParts operator()(const AllReduceArgs& a) const {
    const std::string op = absl::StrCat("op=", ReduceOpName(a.op));
    return {absl::StrCat(op, " ", TensorText(a.tensor)),
            absl::StrCat(op, ", tensor=", TensorText(a.tensor))};
  }
  SignatureParts operator()(const AllGatherArgs& a) const {
    const std::string common =
        absl::StrCat("dim=", a.dim, " sizes=", SizesText(a.sizes));
    return {absl::StrCat(common, " ", TensorText(a.output)),
            absl::StrCat("dim=", a.dim, ", sizes=", SizesText(a.sizes),
                         ", input=", TensorText(a.input),
                         ", output=", TensorText(a.output))};
  }
  SignatureParts operator()(const ReduceScatterArgs& a) const {
    return {absl::StrCat("dim=", a.dim, " op=", ReduceOpName(a.op), " sizes=",
                         SizesText(a.sizes), " ", TensorText(a.input)),
            absl::StrCat("dim=", a.dim, ", op=", ReduceOpName(a.op), ", sizes=",
                         SizesText(a.sizes), ", input=", TensorText(a.input),
                         ", output=", TensorText(a.output))};
  }
  SignatureParts operator()(const AllToAllArgs& a) const {
    return {
        absl::StrCat("split_dim=", a.split_dim, " concat_dim=", a.concat_dim,
                     " ", DTypeText(a.input)),
        absl::StrCat("split_dim=", a.split_dim, ", concat_dim=", a.concat_dim,
                     ", send_sizes=", SizesText(a.send_sizes), ", recv_sizes=",
                     SizesText(a.recv_sizes), ", input=", TensorText(a.input),
                     ", output=", TensorText(a.output))};
  }
  SignatureParts operator()(const BroadcastArgs& a) const {
    return {absl::StrCat("root=", a.root, " ", TensorText(a.tensor)),
            absl::StrCat("root=", a.root, ", tensor=", TensorText(a.tensor))};
  }
  SignatureParts operator()(const ScatterArgs& a) const {
    return Rooted(a, a.output);
  }
  SignatureParts operator()(const GatherArgs& a) const {
    return Rooted(a, a.input);
  }
  // `piece`: the tensor every rank passes.
  template <typename Args>
  SignatureParts Rooted(const Args& a, const Tensor& piece) const {
    return {absl::StrCat("dim=", a.dim, " root=", a.root,
                         " sizes=", SizesText(a.sizes), " ", DTypeText(piece)),
            absl::StrCat("dim=", a.dim, ", root=", a.root, ", sizes=",
                         SizesText(a.sizes), ", input=", TensorText(a.input),
                         ", output=", TensorText(a.output))};
  }
  SignatureParts operator()(const PermuteArgs& a) const {
    return {absl::StrCat("pairs=", PairsText(a.pairs)),
            absl::StrCat("pairs=", PairsText(a.pairs),
                         ", input=", TensorText(a.input),
                         ", output=", TensorText(a.output))};
  }
  SignatureParts operator()(const BarrierArgs&) const { return {"", ""}; }
  SignatureParts operator()(const SendArgs& a) const {
    return {TensorText(a.tensor),
            absl::StrCat("dst=", a.dst, ", tensor=", TensorText(a.tensor))};
  }
  SignatureParts operator()(const RecvArgs& a) const {
    return {TensorText(a.tensor),
            absl::StrCat("src=", a.src, ", tensor=", TensorText(a.tensor))};
  }
};

}  // namespace

absl::Status CheckCollectiveArgs(CollectiveArgs& args, const CallSite& site) {
  return std::visit(ArgsChecker{site}, args);
}

CallSignature SignCollectiveArgs(const CollectiveArgs& args, int64_t sequence) {
  SignatureParts parts = std::visit(ArgsSigner{}, args);
  const absl::string_view op = CollectiveOpName(args);
  CallSignature signature;
  signature.op = std::string(op);
  signature.key = std::move(parts.key);
  signature.text = sequence >= 0
                       ? absl::StrCat(op, " #", sequence, " (", parts.args, ")")
                       : absl::StrCat(op, " (", parts.args, ")");
  return signature;
}

}  // namespace dtensor
