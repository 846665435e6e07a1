// ReadTextFile: the contents of regular files within the limit; everything
// else (missing, a directory, /dev/zero, a FIFO, too large) is an error naming
// the path, returned at once.
#include "dtensor/base/text_file.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace dtensor {
namespace {

std::string TempPath(const std::string& name) {
  return std::string(::testing::TempDir()) + "/" + name;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

bool Contains(const absl::Status& status, const std::string& text) {
  return status.message().find(text) != absl::string_view::npos;
}

TEST(TextFileTest, ReadsARegularFileWithinTheLimit) {
  const std::string text("plan\0with a nul\n", 16);
  const std::string path = WriteFile("ok.txt", text);
  EXPECT_EQ(ReadTextFile(path, 16).value(), text);
  EXPECT_EQ(ReadTextFile(WriteFile("empty.txt", ""), 0).value(), "");
}

TEST(TextFileTest, RefusesAFileOverTheLimitNamingPathSizeAndLimit) {
  const std::string path = WriteFile("big.txt", std::string(17, 'x'));
  const absl::StatusOr<std::string> text = ReadTextFile(path, 16);
  ASSERT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(text.status(), path)) << text.status();
  EXPECT_TRUE(Contains(text.status(), "17 bytes")) << text.status();
  EXPECT_TRUE(Contains(text.status(), "limit is 16")) << text.status();
}

TEST(TextFileTest, RefusesDevicesDirectoriesAndFifos) {
  // /dev/zero never ends: reading it would run until memory is exhausted.
  for (const std::string& path :
       {std::string("/dev/zero"), std::string("/dev/null"), TempPath("")}) {
    const absl::StatusOr<std::string> text = ReadTextFile(path, 1 << 20);
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_TRUE(Contains(text.status(), path)) << text.status();
    EXPECT_TRUE(Contains(text.status(), "not a regular file")) << text.status();
  }
  // A FIFO without a writer: opening it must not block.
  const std::string fifo = TempPath("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(ReadTextFile(fifo, 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TextFileTest, MissingFileIsNotFound) {
  const std::string path = TempPath("missing.json");
  const absl::StatusOr<std::string> text = ReadTextFile(path, 1 << 20);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(text.status(), path)) << text.status();
}

}  // namespace
}  // namespace dtensor
