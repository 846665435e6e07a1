#ifndef DTENSOR_TENSOR_CUDA_MULTI_TENSOR_BODY_H_
#define DTENSOR_TENSOR_CUDA_MULTI_TENSOR_BODY_H_

// The bookkeeping of a multi-tensor launch (as PyTorch's multi_tensor_apply):
// one kernel steps many contiguous tensors, each block one chunk of one
// tensor. The tensors' addresses and sizes travel in the kernel's argument
// struct (MultiTensorArgs, under CUDA's 4 KiB of kernel arguments), so a
// launch needs no host-to-device copy (which would wait for the stream). The
// planner (PlanMultiTensorLaunches) is host code and the chunk math
// (ChunkCount, ChunkRange) runs on both sides; the CPU tests check both.

#include <stdint.h>

#include "dtensor/tensor/cuda/host_device.h"

namespace dtensor::cuda {

// Elements of one chunk: what one block of a multi-tensor launch steps.
inline constexpr int64_t kMultiTensorChunk = 65536;
// Tensors and blocks one launch's arguments hold (PyTorch's limits for four
// operand lists: 36 tensors, 320 blocks).
inline constexpr int kMultiTensorMaxTensors = 36;
inline constexpr int kMultiTensorMaxBlocks = 320;

// The elements [begin, end) of a chunk.
struct ElementRange {
  int64_t begin;
  int64_t end;
};

// The chunks of a tensor of `numel` elements (0 for an empty tensor).
DT_HOST_DEVICE inline int64_t ChunkCount(int64_t numel) {
  return (numel + kMultiTensorChunk - 1) / kMultiTensorChunk;
}

// The elements of chunk `chunk` (< ChunkCount(numel)) of a tensor of `numel`
// elements: kMultiTensorChunk of them, fewer in the last chunk.
DT_HOST_DEVICE inline ElementRange ChunkRange(int64_t numel, int64_t chunk) {
  const int64_t begin = chunk * kMultiTensorChunk;
  const int64_t rest = numel - begin;
  return {begin, begin + (rest < kMultiTensorChunk ? rest : kMultiTensorChunk)};
}

// One tensor of a multi-tensor launch: the data of its kDepth operands (all
// contiguous, `numel` elements each).
template <int kDepth>
struct MultiTensorOperand {
  void* addresses[kDepth];
  int64_t numel;
};

// The argument struct of one launch: its tensors, and for each block the
// tensor (an index into addresses and numel) and the chunk of it it steps.
template <int kDepth>
struct MultiTensorArgs {
  void* addresses[kDepth][kMultiTensorMaxTensors];
  int64_t numel[kMultiTensorMaxTensors];
  int32_t block_chunk[kMultiTensorMaxBlocks];
  uint8_t block_tensor[kMultiTensorMaxBlocks];
};

// Four operand lists (AdamW's p, m, v, g) leave room for the kernel's scalar
// arguments in CUDA's 4 KiB.
static_assert(sizeof(MultiTensorArgs<4>) <= 3584, "kernel arguments > 4 KiB");

// Fills args' slot `slot` with `operand`.
template <int kDepth>
void SetMultiTensorSlot(MultiTensorArgs<kDepth>& args, int slot,
                        const MultiTensorOperand<kDepth>& operand) {
  for (int d = 0; d < kDepth; ++d) {
    args.addresses[d][slot] = operand.addresses[d];
  }
  args.numel[slot] = operand.numel;
}

// Calls launch(args, blocks) for consecutive launches that together step
// every chunk of `tensors[0, count)` exactly once, in order, each launch with
// at most kMultiTensorMaxTensors tensors and `blocks` <= kMultiTensorMaxBlocks
// blocks (block b steps chunk args.block_chunk[b] of tensor
// args.block_tensor[b]). A tensor whose chunks do not fit one launch
// continues in the next (in its slot 0). Empty tensors take no launch.
// Requires: every numel >= 0 and below 2^31 chunks (2^47 elements).
// Returns the first result of `launch` other than Error{} (success), which
// ends the planning; Error{} when every launch returned it.
template <int kDepth, typename Launch>
auto PlanMultiTensorLaunches(const MultiTensorOperand<kDepth>* tensors,
                             int64_t count, Launch&& launch)
    -> decltype(launch(MultiTensorArgs<kDepth>{}, 0)) {
  using Error = decltype(launch(MultiTensorArgs<kDepth>{}, 0));
  MultiTensorArgs<kDepth> args{};
  int slots = 0;
  int blocks = 0;
  for (int64_t t = 0; t < count; ++t) {
    const int64_t chunks = ChunkCount(tensors[t].numel);
    if (chunks == 0) continue;
    SetMultiTensorSlot(args, slots++, tensors[t]);
    for (int64_t c = 0; c < chunks; ++c) {
      args.block_tensor[blocks] = static_cast<uint8_t>(slots - 1);
      args.block_chunk[blocks] = static_cast<int32_t>(c);
      ++blocks;
      const bool last_chunk = c == chunks - 1;
      if (blocks < kMultiTensorMaxBlocks &&
          !(slots == kMultiTensorMaxTensors && last_chunk)) {
        continue;
      }
      const Error error = launch(args, blocks);
      if (error != Error{}) return error;
      blocks = 0;
      slots = 0;
      // The tensor's remaining chunks go on in slot 0 of the next launch.
      if (!last_chunk) SetMultiTensorSlot(args, slots++, tensors[t]);
    }
  }
  if (blocks > 0) return launch(args, blocks);
  return Error{};
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_MULTI_TENSOR_BODY_H_
