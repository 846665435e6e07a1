#include "dtensor/parallel/checkpoint_metadata.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/debug_check.h"
#include "dtensor/base/json_text.h"
#include "dtensor/base/json_value.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/parallel/checkpoint_block_io.h"
#include "nlohmann/json.hpp"

namespace dtensor {
namespace parallel {
namespace {

constexpr absl::string_view kFormat = "dtensor-checkpoint";
constexpr int64_t kVersion = 1;
// Integers above this are not exact as JSON numbers (doubles).
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53
// The most bytes a tensor may have: far beyond any file, and small enough
// that its sums with file offsets and chunk sizes (at most 2^53) cannot
// overflow int64.
constexpr int64_t kMaxBytes = int64_t{1} << 62;

nlohmann::ordered_json BlockJson(const StoredBlock& block) {
  return {{"file", block.file},
          {"file_offset", block.file_offset},
          {"offset", block.box.offset},
          {"shape", block.box.shape},
          {"crc32c", block.chunk_crc32c}};
}

nlohmann::ordered_json TensorJson(const StoredTensor& tensor) {
  nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
  for (const StoredBlock& block : tensor.blocks) {
    blocks.push_back(BlockJson(block));
  }
  return {{"dtype", std::string(DTypeName(tensor.dtype))},
          {"shape", tensor.shape},
          {"mesh_shape", tensor.mesh_shape},
          {"layout", tensor.sharding},
          {"blocks", std::move(blocks)}};
}

absl::Status Corrupt(absl::string_view where, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("checkpoint metadata: ", where, ": ", what));
}

absl::StatusOr<const JsonValue*> Field(const JsonValue& object,
                                       absl::string_view name,
                                       JsonValue::Kind kind,
                                       absl::string_view where) {
  const JsonValue* field = object.Find(name);
  if (field == nullptr) {
    return Corrupt(where, absl::StrCat("missing field \"", name, "\""));
  }
  if (field->kind() != kind) {
    return Corrupt(where, absl::StrCat("field \"", name, "\" is ",
                                       JsonKindName(field->kind()),
                                       ", expected ", JsonKindName(kind)));
  }
  return field;
}

absl::StatusOr<int64_t> ToInteger(const JsonValue& value, double max,
                                  absl::string_view what,
                                  absl::string_view where) {
  const double number = value.number_value();
  if (!value.is_number() || number != std::floor(number) || number < 0 ||
      number > max) {
    return Corrupt(where,
                   absl::StrCat(what, " is not an integer in [0, ", max, "]"));
  }
  return static_cast<int64_t>(number);
}

absl::StatusOr<int64_t> IntegerField(const JsonValue& object,
                                     absl::string_view name,
                                     absl::string_view where) {
  DT_ASSIGN_OR_RETURN(const JsonValue* field,
                      Field(object, name, JsonValue::Kind::kNumber, where));
  return ToInteger(*field, kMaxExactInteger, absl::StrCat("\"", name, "\""),
                   where);
}

absl::StatusOr<std::vector<int64_t>> IntegerArrayField(
    const JsonValue& object, absl::string_view name, double max,
    absl::string_view where) {
  DT_ASSIGN_OR_RETURN(const JsonValue* field,
                      Field(object, name, JsonValue::Kind::kArray, where));
  std::vector<int64_t> values;
  values.reserve(field->items().size());
  for (const JsonValue& item : field->items()) {
    DT_ASSIGN_OR_RETURN(
        int64_t value,
        ToInteger(item, max, absl::StrCat("an item of \"", name, "\""), where));
    values.push_back(value);
  }
  return values;
}

absl::StatusOr<std::string> StringField(const JsonValue& object,
                                        absl::string_view name,
                                        absl::string_view where) {
  DT_ASSIGN_OR_RETURN(const JsonValue* field,
                      Field(object, name, JsonValue::Kind::kString, where));
  return field->string_value();
}

// The bytes of a tensor of `shape`, `element_size` bytes an element; nullopt
// above kMaxBytes. Sizes must be >= 0.
std::optional<int64_t> BytesOf(const Shape& shape, int64_t element_size) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t bytes = element_size;
  for (int64_t size : shape) {
    if (size > kMaxBytes / bytes) return std::nullopt;
    bytes *= size;
  }
  return bytes;
}

// Why the blocks of `tensor` (each inside it) do not tile it: the first two
// that overlap, or (when `whole`) the elements they leave uncovered; nullopt
// when they are disjoint (and cover it). Blocks sorted by their first offset
// are compared with the later ones starting before their end, which for the
// grids a save writes is a few each.
std::optional<std::string> TilingFault(const StoredTensor& tensor, bool whole) {
  const std::vector<StoredBlock>& blocks = tensor.blocks;
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  const bool scalar = tensor.shape.empty();
  auto begin = [&](size_t i) { return scalar ? 0 : blocks[i].box.offset[0]; };
  auto end = [&](size_t i) {
    return scalar ? 1 : blocks[i].box.offset[0] + blocks[i].box.shape[0];
  };
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return begin(a) < begin(b); });
  int64_t covered = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const StoredBlock& a = blocks[order[i]];
    if (a.box.empty()) continue;
    covered += a.box.numel();
    for (size_t j = i + 1; j < order.size() && begin(order[j]) < end(order[i]);
         ++j) {
      const StoredBlock& b = blocks[order[j]];
      if (IntersectBoxes(a.box, b.box).has_value()) {
        const size_t first = std::min(order[i], order[j]);
        const size_t second = std::max(order[i], order[j]);
        return absl::StrCat("blocks ", first, " (", BoxText(blocks[first].box),
                            ") and ", second, " (", BoxText(blocks[second].box),
                            ") overlap");
      }
    }
  }
  if (whole && covered != NumElements(tensor.shape)) {
    return absl::StrCat("the blocks hold ", covered, " of the ",
                        NumElements(tensor.shape), " elements of shape ",
                        ShapeToString(tensor.shape));
  }
  return std::nullopt;
}

absl::StatusOr<StoredBlock> ParseBlock(const JsonValue& json,
                                       const StoredTensor& tensor,
                                       int64_t chunk_bytes,
                                       absl::string_view where) {
  if (!json.is_object()) return Corrupt(where, "not an object");
  StoredBlock block;
  DT_ASSIGN_OR_RETURN(block.file, StringField(json, "file", where));
  if (block.file.empty() || block.file.find('/') != std::string::npos) {
    return Corrupt(where, absl::StrCat("bad file name \"", block.file, "\""));
  }
  DT_ASSIGN_OR_RETURN(block.file_offset,
                      IntegerField(json, "file_offset", where));
  DT_ASSIGN_OR_RETURN(
      block.box.offset,
      IntegerArrayField(json, "offset", kMaxExactInteger, where));
  DT_ASSIGN_OR_RETURN(
      block.box.shape,
      IntegerArrayField(json, "shape", kMaxExactInteger, where));
  const size_t rank = tensor.shape.size();
  if (block.box.offset.size() != rank || block.box.shape.size() != rank) {
    return Corrupt(where, absl::StrCat("box of rank ", block.box.shape.size(),
                                       " in a tensor of rank ", rank));
  }
  for (size_t d = 0; d < rank; ++d) {
    if (block.box.offset[d] + block.box.shape[d] > tensor.shape[d]) {
      return Corrupt(where, absl::StrCat("box (", BoxText(block.box),
                                         ") exceeds the tensor shape ",
                                         ShapeToString(tensor.shape)));
    }
  }
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> crcs,
                      IntegerArrayField(json, "crc32c", 4294967295.0, where));
  // The box lies in the tensor, whose bytes ParseTensor bounded by 2^62, and
  // file_offset is at most 2^53: their sums, and those with a chunk size,
  // fit in int64.
  const int64_t nbytes =
      block.box.numel() * static_cast<int64_t>(ElementSize(tensor.dtype));
  if (static_cast<int64_t>(crcs.size()) != ChunkCount(nbytes, chunk_bytes)) {
    return Corrupt(where, absl::StrCat(crcs.size(), " checksums for ", nbytes,
                                       " bytes in chunks of ", chunk_bytes));
  }
  block.chunk_crc32c.assign(crcs.begin(), crcs.end());
  return block;
}

absl::StatusOr<StoredTensor> ParseTensor(const JsonValue& json,
                                         int64_t chunk_bytes,
                                         BlockCoverage coverage,
                                         absl::string_view where) {
  if (!json.is_object()) return Corrupt(where, "not an object");
  StoredTensor tensor;
  DT_ASSIGN_OR_RETURN(const std::string dtype,
                      StringField(json, "dtype", where));
  absl::StatusOr<DType> parsed = ParseDType(dtype);
  if (!parsed.ok()) return Corrupt(where, parsed.status().message());
  tensor.dtype = *parsed;
  DT_ASSIGN_OR_RETURN(
      tensor.shape, IntegerArrayField(json, "shape", kMaxExactInteger, where));
  if (!BytesOf(tensor.shape, ElementSize(tensor.dtype)).has_value()) {
    return Corrupt(
        where, absl::StrCat("\"shape\" ", ShapeToString(tensor.shape), " of ",
                            std::string(DTypeName(tensor.dtype)),
                            " holds more than 2^62 bytes"));
  }
  DT_ASSIGN_OR_RETURN(
      tensor.mesh_shape,
      IntegerArrayField(json, "mesh_shape", kMaxExactInteger, where));
  DT_ASSIGN_OR_RETURN(tensor.sharding, StringField(json, "layout", where));
  DT_ASSIGN_OR_RETURN(const JsonValue* blocks,
                      Field(json, "blocks", JsonValue::Kind::kArray, where));
  for (size_t i = 0; i < blocks->items().size(); ++i) {
    DT_ASSIGN_OR_RETURN(StoredBlock block,
                        ParseBlock(blocks->items()[i], tensor, chunk_bytes,
                                   absl::StrCat(where, " block ", i)));
    tensor.blocks.push_back(std::move(block));
  }
  if (std::optional<std::string> fault =
          TilingFault(tensor, coverage == BlockCoverage::kWhole)) {
    return Corrupt(where, *fault);
  }
  return tensor;
}

}  // namespace

std::string BoxText(const ShardBlock& box) {
  std::ostringstream text;
  text << box;
  return text.str();
}

int64_t ChunkCount(int64_t nbytes, int64_t chunk_bytes) {
  DT_DCHECK(nbytes >= 0 && chunk_bytes > 0);
  return nbytes / chunk_bytes + (nbytes % chunk_bytes != 0 ? 1 : 0);
}

std::string MetadataToJson(const CheckpointMetadata& metadata) {
  nlohmann::ordered_json tensors = nlohmann::ordered_json::object();
  for (const auto& [key, tensor] : metadata.tensors) {
    tensors[key] = TensorJson(tensor);
  }
  const nlohmann::ordered_json document = {
      {"format", std::string(kFormat)},
      {"version", kVersion},
      {"chunk_bytes", metadata.chunk_bytes},
      {"tensors", std::move(tensors)}};
  return DumpJson(document) + "\n";
}

absl::StatusOr<CheckpointMetadata> ParseMetadata(absl::string_view text,
                                                 BlockCoverage coverage) {
  absl::StatusOr<JsonValue> json = ParseJson(text);
  if (!json.ok()) {
    return Corrupt("invalid or truncated JSON", json.status().message());
  }
  if (!json->is_object()) return Corrupt("document", "not an object");
  DT_ASSIGN_OR_RETURN(const std::string format,
                      StringField(*json, "format", "document"));
  DT_ASSIGN_OR_RETURN(int64_t version,
                      IntegerField(*json, "version", "document"));
  if (format != kFormat || version != kVersion) {
    return Corrupt("document", absl::StrCat("format \"", format, "\" version ",
                                            version, ", expected \"", kFormat,
                                            "\" version ", kVersion));
  }
  CheckpointMetadata metadata;
  DT_ASSIGN_OR_RETURN(metadata.chunk_bytes,
                      IntegerField(*json, "chunk_bytes", "document"));
  if (metadata.chunk_bytes < 1) {
    return Corrupt("document", "\"chunk_bytes\" is 0");
  }
  DT_ASSIGN_OR_RETURN(
      const JsonValue* tensors,
      Field(*json, "tensors", JsonValue::Kind::kObject, "document"));
  for (const auto& [key, value] : tensors->members()) {
    DT_ASSIGN_OR_RETURN(StoredTensor tensor,
                        ParseTensor(value, metadata.chunk_bytes, coverage,
                                    absl::StrCat("tensor \"", key, "\"")));
    metadata.tensors.emplace(key, std::move(tensor));
  }
  return metadata;
}

absl::Status MergeMetadata(const CheckpointMetadata& piece,
                           CheckpointMetadata& into) {
  if (piece.chunk_bytes != into.chunk_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: chunk sizes ", piece.chunk_bytes, " and ",
                     into.chunk_bytes, " differ between ranks"));
  }
  for (const auto& [key, tensor] : piece.tensors) {
    auto [it, inserted] = into.tensors.emplace(key, tensor);
    if (inserted) continue;
    StoredTensor& held = it->second;
    if (held.dtype != tensor.dtype || held.shape != tensor.shape ||
        held.mesh_shape != tensor.mesh_shape ||
        held.sharding != tensor.sharding) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint: ranks disagree on tensor \"", key,
          "\": ", std::string(DTypeName(held.dtype)), ShapeToString(held.shape),
          " ", held.sharding, " vs ", std::string(DTypeName(tensor.dtype)),
          ShapeToString(tensor.shape), " ", tensor.sharding));
    }
    held.blocks.insert(held.blocks.end(), tensor.blocks.begin(),
                       tensor.blocks.end());
  }
  return absl::OkStatus();
}

absl::Status CheckCoverage(const CheckpointMetadata& metadata) {
  for (const auto& [key, tensor] : metadata.tensors) {
    if (std::optional<std::string> fault = TilingFault(tensor, true)) {
      return absl::InternalError(
          absl::StrCat("checkpoint: tensor \"", key, "\": ", *fault,
                       " (did every rank of the world call SaveCheckpoint?)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace parallel
}  // namespace dtensor
