// The checkpoint's building blocks: CRC-32C against published check values
// and a bitwise reference, and metadata.json's round trip and validation.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/json_value.h"
#include "dtensor/parallel/checkpoint_block_io.h"
#include "dtensor/parallel/checkpoint_checksum.h"
#include "dtensor/parallel/checkpoint_metadata.h"
#include "gtest/gtest.h"

namespace dtensor {
namespace parallel {
namespace {

// CRC-32C one bit at a time, straight from the definition (reflected
// polynomial 0x82F63B78, initial and final inversion).
uint32_t BitwiseCrc32c(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
    }
  }
  return ~crc;
}

TEST(Crc32cTest, MatchesCheckValuesAndTheBitwiseDefinition) {
  // RFC 3720 (iSCSI) B.4 and the catalogue's check value.
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0').data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff').data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(rng() % 100, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    const uint32_t want = BitwiseCrc32c(bytes);
    EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), want);
    EXPECT_EQ(Crc32cPortable(bytes.data(), bytes.size()), want);
    const size_t cut = bytes.empty() ? 0 : rng() % bytes.size();
    EXPECT_EQ(Crc32c(bytes.data() + cut, bytes.size() - cut,
                     Crc32c(bytes.data(), cut)),
              want);
  }
}

CheckpointMetadata Example() {
  CheckpointMetadata metadata;
  metadata.chunk_bytes = 16;
  StoredTensor& w = metadata.tensors["layers.0.w \"q\""];
  w.dtype = DType::kBF16;
  w.shape = {5, 3};
  w.mesh_shape = {2, 2};
  w.sharding = "S(0),R";
  w.blocks.push_back({"data_0.bin", 0, {{3, 3}, {0, 0}}, {1, 4294967295u}});
  w.blocks.push_back({"data_2.bin", 7, {{2, 3}, {3, 0}}, {12345}});
  StoredTensor& step = metadata.tensors["step"];
  step.dtype = DType::kI64;
  step.blocks.push_back({"data_0.bin", 18, {}, {99}});
  return metadata;
}

TEST(CheckpointMetadataTest, RoundTrips) {
  const CheckpointMetadata metadata = Example();
  absl::StatusOr<CheckpointMetadata> parsed =
      ParseMetadata(MetadataToJson(metadata));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->chunk_bytes, 16);
  ASSERT_EQ(parsed->tensors.size(), 2u);
  const StoredTensor& w = parsed->tensors.at("layers.0.w \"q\"");
  EXPECT_EQ(w.dtype, DType::kBF16);
  EXPECT_EQ(w.shape, (Shape{5, 3}));
  EXPECT_EQ(w.mesh_shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(w.sharding, "S(0),R");
  ASSERT_EQ(w.blocks.size(), 2u);
  EXPECT_EQ(w.blocks[1].file, "data_2.bin");
  EXPECT_EQ(w.blocks[1].file_offset, 7);
  EXPECT_EQ(w.blocks[1].box, (ShardBlock{{2, 3}, {3, 0}}));
  EXPECT_EQ(w.blocks[0].chunk_crc32c, (std::vector<uint32_t>{1, 4294967295u}));
  EXPECT_EQ(parsed->tensors.at("step").blocks[0].chunk_crc32c,
            std::vector<uint32_t>{99});
}

std::vector<std::string> Keys(const JsonValue& object) {
  std::vector<std::string> keys;
  for (const JsonValue::Member& member : object.members()) {
    keys.push_back(member.first);
  }
  return keys;
}

// metadata.json read back by ParseJson, a reader independent of the writer:
// every field in order, and a tensor name that needs escapes. (The document
// holds integers and strings only, so no number can be non-finite.)
TEST(CheckpointMetadataTest, JsonReadsBackWithParseJson) {
  CheckpointMetadata metadata = Example();
  const std::string odd = "w \"q\" \\ \n\t\x01 \xC3\xA9 \xF0\x9F\x98\x80";
  // A copy first: inserting may rehash and move the entry read.
  const StoredTensor step = metadata.tensors.at("step");
  metadata.tensors[odd] = step;
  const std::string text = MetadataToJson(metadata);
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "one line: " << text;
  absl::StatusOr<JsonValue> json = ParseJson(text);
  ASSERT_TRUE(json.ok()) << json.status() << " in " << text;
  EXPECT_EQ(Keys(*json), (std::vector<std::string>{"format", "version",
                                                   "chunk_bytes", "tensors"}));
  EXPECT_EQ(json->Find("format")->string_value(), "dtensor-checkpoint");
  EXPECT_EQ(json->Find("version")->number_value(), 1);
  EXPECT_EQ(json->Find("chunk_bytes")->number_value(), 16);
  const JsonValue& tensors = *json->Find("tensors");
  EXPECT_EQ(Keys(tensors),
            (std::vector<std::string>{"layers.0.w \"q\"", "step", odd}));
  const JsonValue& w = tensors.members()[0].second;
  EXPECT_EQ(Keys(w), (std::vector<std::string>{"dtype", "shape", "mesh_shape",
                                               "layout", "blocks"}));
  EXPECT_EQ(w.Find("dtype")->string_value(), "bf16");
  EXPECT_EQ(w.Find("mesh_shape")->items()[1].number_value(), 2);
  EXPECT_EQ(w.Find("layout")->string_value(), "S(0),R");
  const JsonValue& block = w.Find("blocks")->items()[1];
  EXPECT_EQ(Keys(block),
            (std::vector<std::string>{"file", "file_offset", "offset", "shape",
                                      "crc32c"}));
  EXPECT_EQ(block.Find("file")->string_value(), "data_2.bin");
  EXPECT_EQ(block.Find("file_offset")->number_value(), 7);
  EXPECT_EQ(block.Find("offset")->items()[0].number_value(), 3);
  EXPECT_EQ(
      w.Find("blocks")->items()[0].Find("crc32c")->items()[1].number_value(),
      4294967295.0);
  absl::StatusOr<CheckpointMetadata> parsed = ParseMetadata(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->tensors.count(odd), 1u);
}

TEST(CheckpointMetadataTest, InvalidDocumentsNameTheFault) {
  const std::string good = MetadataToJson(Example());
  struct Case {
    std::string text;
    std::string message;
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  const Case cases[] = {
      {good.substr(0, good.size() / 2), "invalid or truncated"},
      {"[]", "not an object"},
      {replaced("\"version\":1", "\"version\":2"), "version 2"},
      {replaced("\"dtype\":\"bf16\"", "\"dtype\":\"q8\""), "q8"},
      {replaced("\"shape\":[5,3]", "\"shape\":[5,2]"), "exceeds"},
      {replaced("\"crc32c\":[12345]", "\"crc32c\":[]"), "0 checksums"},
      {replaced("\"crc32c\":[12345]", "\"crc32c\":[-1]"), "crc32c"},
      {replaced("\"file\":\"data_2.bin\"", "\"file\":\"../x\""), "../x"},
      {replaced("\"file_offset\":7", "\"file_offset\":7.5"), "file_offset"},
      {replaced("\"layout\":\"S(0),R\",", ""), "missing field \"layout\""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CheckpointMetadata> parsed = ParseMetadata(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), c.message))
        << parsed.status() << " lacks " << c.message;
  }
}

// Tampered blocks of "layers.0.w \"q\"" ([5, 3], blocks of rows 0-2 and
// 3-4) moved or shrunk along dim 0: those that overlap or leave elements out
// are refused, as a brute-force count of every element decides.
TEST(CheckpointMetadataTest, BlocksMustTileTheTensor) {
  const std::string key = "layers.0.w \"q\"";
  std::mt19937 rng(11);
  int overlapping = 0, gapped = 0;
  for (int trial = 0; trial < 300; ++trial) {
    CheckpointMetadata metadata = Example();
    StoredTensor& w = metadata.tensors.at(key);
    StoredBlock& moved = w.blocks[rng() % 2];
    if (moved.box.shape[0] > 1 && rng() % 2 == 0) {
      --moved.box.shape[0];
      moved.chunk_crc32c.resize(ChunkCount(moved.box.numel() * 2, 16));
    }
    moved.box.offset[0] = rng() % (6 - moved.box.shape[0]);
    std::vector<int> count(15, 0);
    for (const StoredBlock& block : w.blocks) {
      for (int64_t i = 0; i < block.box.shape[0]; ++i) {
        for (int64_t j = 0; j < 3; ++j) {
          ++count[(block.box.offset[0] + i) * 3 + j];
        }
      }
    }
    const bool overlap = absl::c_any_of(count, [](int c) { return c > 1; });
    const bool gap = absl::c_any_of(count, [](int c) { return c == 0; });
    absl::StatusOr<CheckpointMetadata> parsed =
        ParseMetadata(MetadataToJson(metadata));
    // An index file needs disjoint blocks only.
    EXPECT_EQ(
        ParseMetadata(MetadataToJson(metadata), BlockCoverage::kPart).ok(),
        !overlap);
    if (!overlap && !gap) {
      EXPECT_TRUE(parsed.ok()) << parsed.status();
      continue;
    }
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), key))
        << parsed.status();
    const std::string why = overlap ? "blocks 0 (" : "the blocks hold";
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), why))
        << parsed.status() << " lacks " << why;
    overlapping += overlap;
    gapped += !overlap;
  }
  EXPECT_GT(overlapping, 0);
  EXPECT_GT(gapped, 0);
}

// Shapes whose byte counts overflow int64 are DataLoss naming the field.
TEST(CheckpointMetadataTest, HugeShapesAreRefusedWithoutOverflow) {
  const std::string good = MetadataToJson(Example());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  // 2^52 * 2^52 elements; 2^31 * 2^31 bf16 elements = 2^63 bytes.
  for (const char* shape :
       {"[4503599627370496,4503599627370496]", "[2147483648,2147483648]"}) {
    absl::StatusOr<CheckpointMetadata> parsed = ParseMetadata(
        replaced("\"shape\":[5,3]", absl::StrCat("\"shape\":", shape)));
    ASSERT_FALSE(parsed.ok()) << shape;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), "\"shape\""))
        << parsed.status();
  }
  // Big but representable: 2^40 i64 elements (2^43 bytes) in one block.
  CheckpointMetadata big;
  big.chunk_bytes = int64_t{1} << 40;
  StoredTensor& t = big.tensors["big"];
  t.dtype = DType::kI64;
  t.shape = {int64_t{1} << 40};
  t.blocks.push_back(
      {"data_0.bin", 0, {{int64_t{1} << 40}, {0}}, std::vector<uint32_t>(8)});
  absl::StatusOr<CheckpointMetadata> parsed =
      ParseMetadata(MetadataToJson(big));
  EXPECT_TRUE(parsed.ok()) << parsed.status();
}

TEST(CheckpointMetadataTest, MergeChecksAgreementAndCoverage) {
  CheckpointMetadata into = Example();
  CheckpointMetadata piece;
  piece.chunk_bytes = 16;
  piece.tensors["step"] = into.tensors.at("step");
  piece.tensors["step"].blocks.clear();
  EXPECT_TRUE(MergeMetadata(piece, into).ok());
  EXPECT_TRUE(CheckCoverage(into).ok());
  into.tensors.at("step").blocks.push_back(into.tensors.at("step").blocks[0]);
  EXPECT_EQ(CheckCoverage(into).code(), absl::StatusCode::kInternal);
  piece.tensors["step"].dtype = DType::kF32;
  const absl::Status disagree = MergeMetadata(piece, into);
  EXPECT_EQ(disagree.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(disagree.message(), "\"step\"")) << disagree;
}

TEST(IntersectBoxesTest, MatchesElementwiseMembership) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    ShardBlock a{
        {static_cast<int64_t>(rng() % 4), 1 + static_cast<int64_t>(rng() % 3)},
        {static_cast<int64_t>(rng() % 4), static_cast<int64_t>(rng() % 4)}};
    ShardBlock b{
        {static_cast<int64_t>(rng() % 4), 1 + static_cast<int64_t>(rng() % 3)},
        {static_cast<int64_t>(rng() % 4), static_cast<int64_t>(rng() % 4)}};
    const std::optional<ShardBlock> both = IntersectBoxes(a, b);
    int64_t count = 0;
    for (int64_t i = 0; i < 8; ++i) {
      for (int64_t j = 0; j < 8; ++j) {
        auto in = [&](const ShardBlock& box) {
          return i >= box.offset[0] && i < box.offset[0] + box.shape[0] &&
                 j >= box.offset[1] && j < box.offset[1] + box.shape[1];
        };
        if (in(a) && in(b)) {
          ++count;
          ASSERT_TRUE(both.has_value());
          EXPECT_TRUE(in(*both));
        }
      }
    }
    EXPECT_EQ(both.has_value() ? both->numel() : 0, count);
  }
}

}  // namespace
}  // namespace parallel
}  // namespace dtensor
