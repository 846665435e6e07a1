#include "dtensor/parallel/checkpoint.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/base/text_file.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/functional.h"
#include "dtensor/collectives/process_groups.h"
#include "dtensor/nn/optim.h"
#include "dtensor/parallel/checkpoint_block_io.h"
#include "dtensor/parallel/checkpoint_files.h"
#include "dtensor/parallel/checkpoint_metadata.h"

namespace dtensor {
namespace parallel {
namespace {

constexpr char kMetadataFile[] = "metadata.json";

std::string DataFileName(int64_t rank) {
  return absl::StrCat("data_", rank, ".bin");
}
std::string IndexFileName(int64_t rank) {
  return absl::StrCat("index_", rank, ".json");
}

// `dir` without trailing slashes; an error for an empty name.
absl::StatusOr<std::string> DirectoryName(std::string dir,
                                          absl::string_view op) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty() || dir == "/") {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": bad checkpoint directory \"", dir, "\""));
  }
  return dir;
}

// The ProcessGroups the ranks call with: `given`, else those of the first
// DTensor of `state` that has any. When there are none this rank cannot
// reach its peers: the error is the state's problem (an undefined or
// metadata-only DTensor) or an empty state.
absl::StatusOr<ProcessGroups*> GroupsOf(const nn::StateDict& state,
                                        ProcessGroups* given,
                                        absl::string_view op) {
  if (given != nullptr) return given;
  for (const auto& [key, tensor] : state) {
    if (tensor.defined() && !tensor.runtime()->metadata_only()) {
      return tensor.runtime()->groups();
    }
  }
  for (const auto& [key, tensor] : state) {
    if (!tensor.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": tensor \"", key, "\" is undefined"));
    }
  }
  if (!state.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(op,
                     ": every tensor has a metadata-only runtime, which "
                     "holds no data"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      op,
      ": the state is empty (a rank that holds no DTensor must set the "
      "options' groups)"));
}

// This rank's problems with `state` that need no peer to find: an undefined
// DTensor, a metadata-only runtime, DTensors of other ProcessGroups than
// `groups`.
absl::Status CheckState(const nn::StateDict& state, ProcessGroups* groups,
                        absl::string_view op) {
  for (const auto& [key, tensor] : state) {
    if (!tensor.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": tensor \"", key, "\" is undefined"));
    }
    if (tensor.runtime()->metadata_only()) {
      return absl::FailedPreconditionError(
          absl::StrCat(op, ": tensor \"", key,
                       "\" has a metadata-only runtime, which holds no data"));
    }
    if (tensor.runtime()->groups() != groups) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": tensor \"", key,
                       "\" belongs to other process groups than the world of "
                       "the checkpoint (the options' groups or those of the "
                       "first tensor)"));
    }
  }
  return absl::OkStatus();
}

// Agrees with every rank of `world` on the outcome of a step: OK when every
// rank's `mine` is OK; else this rank's own error, or Aborted naming the
// lowest failed rank and `consequence`.
absl::Status Agree(Communicator& world, absl::Status mine, absl::string_view op,
                   absl::string_view consequence) {
  const int64_t rank = world.rank();
  Tensor failed = Tensor::Scalar(
      static_cast<double>(mine.ok() ? world.size() : rank), DType::kI64);
  absl::Status reduced = AllReduceAnywhere(world, failed, ReduceOp::kMin);
  if (!mine.ok()) return mine;
  if (!reduced.ok()) return reduced;
  const int64_t first_failed = failed.data<int64_t>()[0];
  if (first_failed == world.size()) return absl::OkStatus();
  return absl::AbortedError(
      absl::StrCat(op, ": rank ", first_failed, " failed; ", consequence));
}

// The tensors to save, in key order, with Partial mesh dims reduced (a
// collective on each such tensor's mesh, so before any step that can fail on
// one rank alone).
absl::StatusOr<std::vector<std::pair<std::string, DTensor>>> Complete(
    const nn::StateDict& state) {
  std::vector<std::pair<std::string, DTensor>> complete;
  for (const auto& [key, tensor] : state) {
    std::vector<int64_t> partial_dims;
    for (int64_t d = 0; d < tensor.mesh().ndim(); ++d) {
      if (tensor.sharding().placement(d).is_partial())
        partial_dims.push_back(d);
    }
    if (partial_dims.empty()) {
      complete.emplace_back(key, tensor);
      continue;
    }
    absl::StatusOr<DTensor> reduced =
        tensor.Redistribute(tensor.sharding().WithReplicated(partial_dims));
    if (!reduced.ok()) {
      return absl::Status(
          reduced.status().code(),
          absl::StrCat("SaveCheckpoint: reducing tensor \"", key,
                       "\": ", reduced.status().message()));
    }
    complete.emplace_back(key, *std::move(reduced));
  }
  return complete;
}

// Writes this rank's data file (the blocks it is the lowest holder of) and
// its index file (every tensor it holds, with those blocks) into `dir`.
absl::Status WriteRankFiles(
    const std::string& dir, int64_t rank,
    const std::vector<std::pair<std::string, DTensor>>& tensors,
    const SaveOptions& options, CheckpointStats& stats) {
  DT_ASSIGN_OR_RETURN(DataFileWriter writer,
                      DataFileWriter::Open(dir, DataFileName(rank)));
  CheckpointMetadata index;
  index.chunk_bytes = options.chunk_bytes;
  for (const auto& [key, tensor] : tensors) {
    const DTensorSpec& spec = tensor.spec();
    StoredTensor& stored = index.tensors[key];
    stored.dtype = spec.dtype();
    stored.shape = spec.shape();
    stored.mesh_shape = spec.mesh().shape();
    stored.sharding = spec.sharding().ToString();
    DT_ASSIGN_OR_RETURN(std::vector<int64_t> holders,
                        spec.ReplicaGroupOf(rank));
    DT_ASSIGN_OR_RETURN(ShardBlock box, tensor.LocalBlock());
    if (*std::min_element(holders.begin(), holders.end()) != rank ||
        box.empty()) {
      continue;
    }
    if (options.before_block) {
      DT_RETURN_IF_ERROR(options.before_block(stats.blocks_written));
    }
    DT_ASSIGN_OR_RETURN(Tensor host, tensor.ToLocal().To(Device::CPU()));
    host = host.Contiguous();
    if (!host.defined()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "SaveCheckpoint: no memory for a copy of tensor \"", key, "\""));
    }
    DT_ASSIGN_OR_RETURN(StoredBlock block,
                        writer.Append(box, host.raw_data(), host.nbytes(),
                                      options.chunk_bytes));
    stored.blocks.push_back(std::move(block));
    ++stats.blocks_written;
    stats.bytes_written += host.nbytes();
  }
  DT_RETURN_IF_ERROR(writer.Close(options.sync));
  return WriteTextFile(absl::StrCat(dir, "/", IndexFileName(rank)),
                       MetadataToJson(index), options.sync);
}

// Rank 0's part once every rank has written: merges the index files into
// metadata.json and puts `tmp` in the place of `dir`. The index files are
// removed only once metadata.json is written, and `tmp` on any failure.
absl::Status Commit(const std::string& tmp, const std::string& dir,
                    int64_t world_size, const SaveOptions& options) {
  CheckpointMetadata metadata;
  metadata.chunk_bytes = options.chunk_bytes;
  absl::Status status;
  for (int64_t rank = 0; rank < world_size && status.ok(); ++rank) {
    absl::StatusOr<std::string> text =
        ReadTextFile(absl::StrCat(tmp, "/", IndexFileName(rank)),
                     kMaxCheckpointMetadataBytes);
    absl::StatusOr<CheckpointMetadata> index =
        text.ok() ? ParseMetadata(*text, BlockCoverage::kPart) : text.status();
    status = index.ok() ? MergeMetadata(*index, metadata) : index.status();
  }
  if (status.ok()) status = CheckCoverage(metadata);
  if (status.ok()) {
    status = WriteTextFile(absl::StrCat(tmp, "/", kMetadataFile),
                           MetadataToJson(metadata), options.sync);
  }
  for (int64_t rank = 0; rank < world_size && status.ok(); ++rank) {
    status = RemoveAll(absl::StrCat(tmp, "/", IndexFileName(rank)));
  }
  if (status.ok()) status = ReplaceDirectory(tmp, dir, options.sync);
  // After a failed swap `tmp` is the new checkpoint; after a later step, the
  // old one (or gone): neither is wanted.
  if (!status.ok()) RemoveAll(tmp).IgnoreError();
  return status;
}

// The prefix of a load error about `key` (and block `block` when >= 0).
std::string LoadContext(const std::string& dir, const std::string& key,
                        int64_t block = -1,
                        const StoredBlock* stored = nullptr) {
  std::string context =
      absl::StrCat("LoadCheckpoint ", dir, ": tensor \"", key, "\"");
  if (stored != nullptr) {
    absl::StrAppend(&context, " block ", block, " (", BoxText(stored->box),
                    ")");
  }
  return context;
}

absl::Status WithContext(const absl::Status& status,
                         const std::string& context) {
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

// This rank's shard of `target` read from the checkpoint into a fresh CPU
// tensor.
absl::StatusOr<Tensor> ReadShard(const std::string& dir, const std::string& key,
                                 const DTensor& target,
                                 const CheckpointMetadata& metadata,
                                 DataFileReader& reader) {
  auto it = metadata.tensors.find(key);
  if (it == metadata.tensors.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(LoadContext(dir, key), " is not in the checkpoint"));
  }
  const StoredTensor& stored = it->second;
  if (stored.shape != target.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        LoadContext(dir, key), " has shape ", ShapeToString(stored.shape),
        " in the checkpoint, the target has ", ShapeToString(target.shape())));
  }
  if (stored.dtype != target.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        LoadContext(dir, key), " has dtype ",
        std::string(DTypeName(stored.dtype)), " in the checkpoint, the target ",
        std::string(DTypeName(target.dtype()))));
  }
  for (const Placement& p : target.placements()) {
    if (p.is_partial()) {
      return absl::InvalidArgumentError(absl::StrCat(
          LoadContext(dir, key), ": cannot load into the Partial layout ",
          target.sharding().ToString()));
    }
  }
  DT_ASSIGN_OR_RETURN(ShardBlock box, target.LocalBlock());
  const Tensor& local = target.ToLocal();
  if (!local.defined() || local.shape() != box.shape ||
      local.dtype() != target.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        LoadContext(dir, key), ": the local shard does not match its block (",
        BoxText(box), ")"));
  }
  // nn::Assign stages a device shard through host memory, which needs it
  // contiguous: refused here, before the ranks agree to assign.
  if (!local.device().is_cpu() && !local.is_contiguous()) {
    return absl::FailedPreconditionError(
        absl::StrCat(LoadContext(dir, key), ": the local shard on ",
                     local.device().ToString(), " is not contiguous"));
  }
  DT_ASSIGN_OR_RETURN(Tensor shard, Tensor::Empty(box.shape, target.dtype()));
  const int64_t element_size = ElementSize(target.dtype());
  const int64_t needed_before = reader.bytes_needed();
  for (size_t i = 0; i < stored.blocks.size(); ++i) {
    const StoredBlock& block = stored.blocks[i];
    absl::Status read = reader.ReadOverlap(
        block, element_size, metadata.chunk_bytes, box, shard.raw_data());
    if (!read.ok()) {
      return WithContext(read, LoadContext(dir, key, i, &block));
    }
  }
  if (reader.bytes_needed() - needed_before !=
      static_cast<int64_t>(shard.nbytes())) {
    return absl::DataLossError(absl::StrCat(
        LoadContext(dir, key), ": the stored blocks cover ",
        (reader.bytes_needed() - needed_before) / element_size, " of the ",
        shard.numel(), " elements of this rank's block (", BoxText(box), ")"));
  }
  return shard;
}

// Every shard of `state` read from the checkpoint in `dir`, in key order.
absl::StatusOr<std::vector<Tensor>> ReadShards(const std::string& dir,
                                               const nn::StateDict& state,
                                               CheckpointStats& stats) {
  const std::string path = absl::StrCat(dir, "/", kMetadataFile);
  absl::StatusOr<std::string> text =
      ReadTextFile(path, kMaxCheckpointMetadataBytes);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat("LoadCheckpoint: no checkpoint in ",
                                            dir, " (", path, " is missing)"));
  }
  DT_RETURN_IF_ERROR(text.status());
  absl::StatusOr<CheckpointMetadata> metadata = ParseMetadata(*text);
  if (!metadata.ok()) {
    return WithContext(metadata.status(),
                       absl::StrCat("LoadCheckpoint ", path));
  }
  DataFileReader reader(dir);
  std::vector<Tensor> shards;
  absl::Status status;
  for (const auto& [key, target] : state) {
    absl::StatusOr<Tensor> shard =
        ReadShard(dir, key, target, *metadata, reader);
    if (!shard.ok()) {
      status = shard.status();
      break;
    }
    shards.push_back(*std::move(shard));
  }
  stats.bytes_read += reader.bytes_read();
  stats.bytes_needed += reader.bytes_needed();
  DT_RETURN_IF_ERROR(status);
  return shards;
}

}  // namespace

absl::Status SaveCheckpoint(const std::string& dir, const nn::StateDict& state,
                            const SaveOptions& options) {
  constexpr absl::string_view kOp = "SaveCheckpoint";
  // Every check of this rank's own first, so that no rank starts a
  // collective (the Partial reductions) that a peer will not join.
  absl::StatusOr<std::string> target = DirectoryName(dir, kOp);
  absl::Status checked = target.status();
  if (checked.ok() && options.chunk_bytes < 1) {
    checked = absl::InvalidArgumentError(absl::StrCat(
        kOp, ": chunk_bytes ", options.chunk_bytes, " must be >= 1"));
  }
  absl::StatusOr<ProcessGroups*> groups = GroupsOf(state, options.groups, kOp);
  if (!groups.ok()) return checked.ok() ? groups.status() : checked;
  DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> world, (*groups)->World());
  const int64_t rank = world->rank();
  constexpr absl::string_view kKept = "the previous checkpoint is kept";
  if (checked.ok()) checked = CheckState(state, *groups, kOp);
  DT_RETURN_IF_ERROR(Agree(*world, std::move(checked), kOp, kKept));

  const std::string tmp = *target + ".tmp";
  absl::StatusOr<std::vector<std::pair<std::string, DTensor>>> tensors =
      Complete(state);
  absl::Status made = tensors.status();
  if (made.ok() && rank == 0) made = MakeEmptyDirectory(tmp);
  CheckpointStats stats;
  absl::Status written = Agree(*world, std::move(made), kOp, kKept);
  if (written.ok()) {
    written = Agree(*world, WriteRankFiles(tmp, rank, *tensors, options, stats),
                    kOp, kKept);
  }
  if (options.stats != nullptr) *options.stats = stats;
  if (!written.ok()) {
    if (rank == 0) RemoveAll(tmp).IgnoreError();
    return written;
  }
  return Agree(*world,
               rank == 0 ? Commit(tmp, *target, world->size(), options)
                         : absl::OkStatus(),
               kOp, "the checkpoint may not have been replaced");
}

absl::Status LoadCheckpoint(const std::string& dir, const nn::StateDict& state,
                            const LoadCheckpointOptions& options) {
  constexpr absl::string_view kOp = "LoadCheckpoint";
  DT_ASSIGN_OR_RETURN(ProcessGroups * groups,
                      GroupsOf(state, options.groups, kOp));
  DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> world, groups->World());
  absl::StatusOr<std::string> source = DirectoryName(dir, kOp);
  if (source.ok()) source = CommittedDirectory(*source);
  absl::Status checked = source.status();
  if (checked.ok()) checked = CheckState(state, groups, kOp);
  CheckpointStats stats;
  absl::StatusOr<std::vector<Tensor>> shards =
      checked.ok() ? ReadShards(*source, state, stats) : checked;
  if (options.stats != nullptr) *options.stats = stats;
  DT_RETURN_IF_ERROR(
      Agree(*world, shards.status(), kOp, "no tensor was changed"));
  // Copies that cannot fail on CPU (ReadShard checked every target).
  size_t i = 0;
  absl::Status assigned;
  for (const auto& [key, target] : state) {
    absl::Status status = nn::Assign(target.ToLocal(), (*shards)[i++]);
    if (assigned.ok() && !status.ok()) {
      assigned = WithContext(status, LoadContext(*source, key));
    }
  }
  return assigned;
}

}  // namespace parallel
}  // namespace dtensor
