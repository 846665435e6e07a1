#include "dtensor/collectives/inprocess/shared_memory_ops.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/argument_checks.h"
#include "dtensor/collectives/inprocess/view_copy.h"
#include "dtensor/collectives/reduce_kernel.h"

namespace dtensor {
namespace {

// Slices of all_reduce start on 64-byte boundaries, so that two ranks never
// write the same cache line.
constexpr int64_t kSliceAlignBytes = 64;

int64_t Size(const PhaseContext& c) {
  return static_cast<int64_t>(c.all.size());
}

const Posting& Of(const PhaseContext& c, int64_t member) {
  return *c.all[member];
}

absl::Status Mismatch(const PhaseContext& c, int64_t a, int64_t b,
                      absl::string_view what, absl::string_view value_a,
                      absl::string_view value_b) {
  return absl::InvalidArgumentError(
      absl::StrCat(c.name, ": ranks disagree on ", what, ": rank ",
                   c.group_ranks[a], " passed ", value_a, " but rank ",
                   c.group_ranks[b], " passed ", value_b));
}

std::string SizesText(absl::Span<const int64_t> sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

// Every rank passed the same value of `field` as rank 0.
template <typename Field, typename Text>
absl::Status CheckAgree(const PhaseContext& c, absl::string_view what,
                        Field field, Text text) {
  for (int64_t r = 1; r < Size(c); ++r) {
    if (!(field(Of(c, r)) == field(Of(c, 0)))) {
      return Mismatch(c, 0, r, what, text(Of(c, 0)), text(Of(c, r)));
    }
  }
  return absl::OkStatus();
}

std::string ValueText(int64_t value) { return absl::StrCat(value); }
std::string ValueText(const std::vector<int64_t>& sizes) {
  return SizesText(sizes);
}
std::string ValueText(ReduceOp op) { return std::string(ReduceOpName(op)); }

// Every rank passed the same posting field `member` (`what`) as rank 0.
template <typename T>
absl::Status CheckSame(const PhaseContext& c, absl::string_view what,
                       T Posting::*member) {
  return CheckAgree(
      c, what, [member](const Posting& p) -> const T& { return p.*member; },
      [member](const Posting& p) { return ValueText(p.*member); });
}

// Every rank's input has rank 0's dtype and shape (`what`: "the input").
absl::Status CheckSameInputs(const PhaseContext& c, absl::string_view what) {
  return CheckAgree(
      c, what,
      [](const Posting& p) {
        return std::make_pair(p.input.dtype(), p.input.shape());
      },
      [](const Posting& p) { return TensorText(p.input); });
}

// `tensor` of rank `a` matches `expected` derived from rank `b`'s posting.
absl::Status CheckPiece(const PhaseContext& c, const Tensor& tensor, int64_t a,
                        DType dtype, absl::Span<const int64_t> expected,
                        int64_t b, absl::string_view relation) {
  if (tensor.dtype() == dtype &&
      absl::MakeConstSpan(tensor.shape()) == expected) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      c.name, ": rank ", c.group_ranks[a], " has ", TensorText(tensor),
      " but rank ", c.group_ranks[b], " ", relation, " ",
      std::string(DTypeName(dtype)), ShapeToString(expected)));
}

// The first element of all_reduce slice `member` of `count` elements; slice
// `size` is the end.
int64_t SliceBegin(int64_t member, int64_t size, int64_t count,
                   int64_t element_size) {
  const int64_t align = std::max<int64_t>(1, kSliceAlignBytes / element_size);
  const int64_t per_rank = (count + size - 1) / size;
  const int64_t aligned = (per_rank + align - 1) / align * align;
  return std::min(count, member * aligned);
}

char* BytesAt(const Tensor& tensor, int64_t element) {
  return static_cast<char*>(tensor.raw_data()) +
         element * static_cast<int64_t>(ElementSize(tensor.dtype()));
}

// Runs `phase`, then the closing barrier even when the phase failed, so that
// the peers are not left waiting; returns the first error.
template <typename Phase>
absl::Status PhaseThenBarrier(const PhaseContext& c, Phase phase) {
  absl::Status status = phase();
  absl::Status barrier = c.barrier();
  return status.ok() ? barrier : status;
}

}  // namespace

absl::Status RunAllReduce(const PhaseContext& c) {
  DT_RETURN_IF_ERROR(CheckSameInputs(c, "the tensor"));
  DT_RETURN_IF_ERROR(CheckSame(c, "the reduce op", &Posting::reduce));
  const Tensor& mine = Of(c, c.me).input;
  const int64_t count = mine.numel();
  const int64_t element_size = ElementSize(mine.dtype());
  const int64_t begin = SliceBegin(c.me, Size(c), count, element_size);
  const int64_t end = SliceBegin(c.me + 1, Size(c), count, element_size);
  if (end > begin) {
    // Only this rank touches this slice of any buffer, so it may write the
    // reduced slice into every rank's buffer, in place.
    std::vector<const void*> inputs(Size(c));
    std::vector<void*> outputs(Size(c));
    for (int64_t r = 0; r < Size(c); ++r) {
      outputs[r] = BytesAt(Of(c, r).input, begin);
      inputs[r] = outputs[r];
    }
    ReduceIntoEach(mine.dtype(), Of(c, c.me).reduce, inputs, outputs,
                   end - begin);
  }
  return c.barrier();
}

absl::Status RunAllGather(const PhaseContext& c) {
  DT_RETURN_IF_ERROR(CheckSame(c, "the dim", &Posting::dim));
  DT_RETURN_IF_ERROR(CheckSame(c, "the piece sizes", &Posting::sizes));
  const Posting& mine = Of(c, c.me);
  const std::vector<int64_t>& sizes = mine.sizes;
  for (int64_t r = 0; r < Size(c); ++r) {
    DT_RETURN_IF_ERROR(
        CheckPiece(c, Of(c, r).input, r, mine.output.dtype(),
                   WithDimSize(mine.output.shape(), mine.dim, sizes[r]), c.me,
                   "expects from it"));
  }
  return PhaseThenBarrier(c, [&]() -> absl::Status {
    for (int64_t r = 0; r < Size(c); ++r) {
      DT_ASSIGN_OR_RETURN(
          Tensor slot,
          mine.output.Narrow(mine.dim, OffsetOf(sizes, r), sizes[r]));
      DT_RETURN_IF_ERROR(CopyView(slot, Of(c, r).input));
    }
    return absl::OkStatus();
  });
}

absl::Status RunReduceScatter(const PhaseContext& c) {
  DT_RETURN_IF_ERROR(CheckSame(c, "the dim", &Posting::dim));
  DT_RETURN_IF_ERROR(CheckSame(c, "the piece sizes", &Posting::sizes));
  DT_RETURN_IF_ERROR(CheckSame(c, "the reduce op", &Posting::reduce));
  DT_RETURN_IF_ERROR(CheckSameInputs(c, "the input"));
  const Posting& mine = Of(c, c.me);
  return PhaseThenBarrier(c, [&]() -> absl::Status {
    // My piece of every input, contiguous (in place where it already is).
    const int64_t offset = OffsetOf(mine.sizes, c.me);
    std::vector<Tensor> pieces;
    std::vector<const void*> inputs;
    for (int64_t r = 0; r < Size(c); ++r) {
      DT_ASSIGN_OR_RETURN(
          Tensor piece,
          Of(c, r).input.Narrow(mine.dim, offset, mine.sizes[c.me]));
      pieces.push_back(piece.Contiguous());
      if (!pieces.back().defined()) {
        return absl::ResourceExhaustedError(
            absl::StrCat(c.name, ": no memory for a contiguous piece"));
      }
      inputs.push_back(pieces.back().raw_data());
    }
    if (mine.output.is_contiguous()) {
      ReduceInto(mine.output.dtype(), mine.reduce, inputs,
                 mine.output.raw_data(), mine.output.numel());
      return absl::OkStatus();
    }
    DT_ASSIGN_OR_RETURN(
        Tensor result, Tensor::Empty(mine.output.shape(), mine.output.dtype()));
    ReduceInto(result.dtype(), mine.reduce, inputs, result.raw_data(),
               result.numel());
    Tensor output = mine.output;  // A view: writes go to the caller's.
    return output.CopyFrom(result);
  });
}

absl::Status RunAllToAll(const PhaseContext& c) {
  DT_RETURN_IF_ERROR(CheckSame(c, "the dim", &Posting::dim));
  DT_RETURN_IF_ERROR(CheckSame(c, "the concat dim", &Posting::concat_dim));
  for (int64_t i = 0; i < Size(c); ++i) {
    const Posting& src = Of(c, i);
    for (int64_t j = 0; j < Size(c); ++j) {
      const Posting& dst = Of(c, j);
      const Shape expected =
          WithDimSize(dst.output.shape(), dst.concat_dim, dst.recv_sizes[i]);
      const Shape piece = WithDimSize(src.input.shape(), src.dim, src.sizes[j]);
      if (src.input.dtype() != dst.output.dtype() || piece != expected) {
        return absl::InvalidArgumentError(absl::StrCat(
            c.name, ": rank ", c.group_ranks[i], " sends ",
            std::string(DTypeName(src.input.dtype())), ShapeToString(piece),
            " to rank ", c.group_ranks[j], ", which expects ",
            std::string(DTypeName(dst.output.dtype())),
            ShapeToString(expected)));
      }
    }
  }
  const Posting& mine = Of(c, c.me);
  return PhaseThenBarrier(c, [&]() -> absl::Status {
    for (int64_t i = 0; i < Size(c); ++i) {
      const Posting& src = Of(c, i);
      DT_ASSIGN_OR_RETURN(Tensor piece,
                          src.input.Narrow(src.dim, OffsetOf(src.sizes, c.me),
                                           src.sizes[c.me]));
      DT_ASSIGN_OR_RETURN(
          Tensor slot,
          mine.output.Narrow(mine.concat_dim, OffsetOf(mine.recv_sizes, i),
                             mine.recv_sizes[i]));
      DT_RETURN_IF_ERROR(CopyView(slot, piece));
    }
    return absl::OkStatus();
  });
}

absl::Status RunBroadcast(const PhaseContext& c) {
  DT_RETURN_IF_ERROR(CheckSame(c, "the root", &Posting::root));
  const int64_t root = Of(c, 0).root;
  const Tensor& source = Of(c, root).input;
  for (int64_t r = 0; r < Size(c); ++r) {
    DT_RETURN_IF_ERROR(CheckPiece(c, Of(c, r).input, r, source.dtype(),
                                  source.shape(), root, "broadcasts"));
  }
  return PhaseThenBarrier(c, [&]() -> absl::Status {
    if (c.me == root) return absl::OkStatus();
    return CopyView(Of(c, c.me).input, source);
  });
}

namespace {

// Scatter's and gather's checks: the same root, dim and sizes on every rank,
// and each rank's piece (its output when `scattering`, else its input)
// shaped as its piece of the root's whole tensor (the root's input when
// `scattering`, else its output). Returns the root's posting.
absl::StatusOr<const Posting*> CheckRootedPieces(const PhaseContext& c,
                                                 bool scattering) {
  DT_RETURN_IF_ERROR(CheckSame(c, "the root", &Posting::root));
  DT_RETURN_IF_ERROR(CheckSame(c, "the dim", &Posting::dim));
  DT_RETURN_IF_ERROR(CheckSame(c, "the piece sizes", &Posting::sizes));
  const Posting& root = Of(c, Of(c, 0).root);
  const Tensor& whole = scattering ? root.input : root.output;
  for (int64_t r = 0; r < Size(c); ++r) {
    const Tensor& piece = scattering ? Of(c, r).output : Of(c, r).input;
    DT_RETURN_IF_ERROR(CheckPiece(
        c, piece, r, whole.dtype(),
        WithDimSize(whole.shape(), root.dim, root.sizes[r]), root.root,
        scattering ? "scatters to it" : "gathers from it"));
  }
  return &root;
}

}  // namespace

absl::Status RunScatter(const PhaseContext& c) {
  DT_ASSIGN_OR_RETURN(const Posting* rooted, CheckRootedPieces(c, true));
  const Posting& root = *rooted;
  const Posting& mine = Of(c, c.me);
  return PhaseThenBarrier(c, [&]() -> absl::Status {
    DT_ASSIGN_OR_RETURN(Tensor piece,
                        root.input.Narrow(root.dim, OffsetOf(root.sizes, c.me),
                                          root.sizes[c.me]));
    return CopyView(mine.output, piece);
  });
}

absl::Status RunGather(const PhaseContext& c) {
  DT_ASSIGN_OR_RETURN(const Posting* rooted, CheckRootedPieces(c, false));
  const Posting& root = *rooted;
  return PhaseThenBarrier(c, [&]() -> absl::Status {
    if (c.me != root.root) return absl::OkStatus();
    for (int64_t r = 0; r < Size(c); ++r) {
      DT_ASSIGN_OR_RETURN(
          Tensor slot,
          root.output.Narrow(root.dim, OffsetOf(root.sizes, r), root.sizes[r]));
      DT_RETURN_IF_ERROR(CopyView(slot, Of(c, r).input));
    }
    return absl::OkStatus();
  });
}

absl::Status RunPermute(const PhaseContext& c) {
  auto pairs_text = [](const Posting& p) {
    return absl::StrCat(
        "[",
        absl::StrJoin(p.pairs, ", ",
                      [](std::string* out, const PermutePair& pair) {
                        absl::StrAppend(out, pair.src, "->", pair.dst);
                      }),
        "]");
  };
  DT_RETURN_IF_ERROR(CheckAgree(c, "the pairs", pairs_text, pairs_text));
  const std::vector<PermutePair>& pairs = Of(c, c.me).pairs;
  for (const PermutePair& pair : pairs) {
    const Tensor& sent = Of(c, pair.src).input;
    DT_RETURN_IF_ERROR(CheckPiece(c, Of(c, pair.dst).output, pair.dst,
                                  sent.dtype(), sent.shape(), pair.src,
                                  "sends it"));
  }
  return PhaseThenBarrier(c, [&]() -> absl::Status {
    for (const PermutePair& pair : pairs) {
      if (pair.dst != c.me) continue;
      return CopyView(Of(c, c.me).output, Of(c, pair.src).input);
    }
    return absl::OkStatus();
  });
}

}  // namespace dtensor
