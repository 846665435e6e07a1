#ifndef DTENSOR_TESTS_PARALLEL_TINY_LLAMA_GPU_H_
#define DTENSOR_TESTS_PARALLEL_TINY_LLAMA_GPU_H_

// What the GPU tests that train the tiny Llama on one CUDA rank share: the
// batches of each step and the one-rank cluster that makes the trainers.

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dtensor/parallel/llama_trainer.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::parallel {

// Tokens [batch, seq] of step `step` on the CPU (deterministic, in the
// vocabulary, every step's different) and their next-token targets.
absl::StatusOr<std::pair<Tensor, Tensor>> TinyStepData(int64_t vocab, int step,
                                                       int64_t batch,
                                                       int64_t seq);

// Makes a trainer of the tiny Llama on the cluster's one rank.
using MakeTinyTrainer =
    std::function<absl::StatusOr<std::unique_ptr<LlamaTrainer>>()>;

// Runs body(make, vocab size) on one in-process rank on CUDA device 0; each
// make() creates a trainer of the tiny config with `options` (its config and
// device set here) and the empty plan.
absl::Status WithTinyTrainers(
    LlamaTrainerOptions options,
    const std::function<absl::Status(const MakeTinyTrainer& make,
                                     int64_t vocab)>& body);

}  // namespace dtensor::parallel

#endif  // DTENSOR_TESTS_PARALLEL_TINY_LLAMA_GPU_H_
