// Runs the //tools:dtensor binary (a data dependency) as a user would.

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

struct Result {
  int status;
  std::string out, err;
};

std::string ShellQuote(const std::string& arg) {
  std::string quoted = "'";
  for (char c : arg) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// Runs the tool with `args` through the shell, capturing stdout, stderr and
// the exit status.
Result RunTool(const std::vector<std::string>& args) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* tmpdir = std::getenv("TEST_TMPDIR");
  EXPECT_NE(srcdir, nullptr);
  EXPECT_NE(tmpdir, nullptr);
  if (srcdir == nullptr || tmpdir == nullptr) return {-1, "", ""};
  const std::string err_path = std::string(tmpdir) + "/stderr.txt";
  std::string command =
      ShellQuote(std::string(srcdir) + "/dtensor/tools/dtensor");
  for (const std::string& arg : args) command += " " + ShellQuote(arg);
  command += " 2>" + ShellQuote(err_path);

  Result result;
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  if (pipe == nullptr) return {-1, "", ""};
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    result.out.append(buffer, n);
  }
  const int wait_status = pclose(pipe);
  result.status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  std::ifstream err_file(err_path);
  std::stringstream err;
  err << err_file.rdbuf();
  result.err = err.str();
  return result;
}

TEST(DtensorCliTest, ShardingJsonForTheIssueExample) {
  const Result r = RunTool({"layout", "--mesh", "4x2", "--shape", "18,2",
                            "--placements", "S(0),S(0)", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(
      r.out,
      R"j({"mesh":[4,2],"shape":[18,2],"placements":"S(0),S(0)","ranks":[)j"
      R"j({"rank":0,"coord":[0,0],"local_shape":[3,2],"global_offset":[0,0]},)j"
      R"j({"rank":1,"coord":[0,1],"local_shape":[2,2],"global_offset":[3,0]},)j"
      R"j({"rank":2,"coord":[1,0],"local_shape":[3,2],"global_offset":[5,0]},)j"
      R"j({"rank":3,"coord":[1,1],"local_shape":[2,2],"global_offset":[8,0]},)j"
      R"j({"rank":4,"coord":[2,0],"local_shape":[3,2],"global_offset":[10,0]},)j"
      R"j({"rank":5,"coord":[2,1],"local_shape":[2,2],"global_offset":[13,0]},)j"
      R"j({"rank":6,"coord":[3,0],"local_shape":[2,2],"global_offset":[15,0]},)j"
      R"j({"rank":7,"coord":[3,1],"local_shape":[1,2],"global_offset":[17,0]}]})j"
      "\n");
}

TEST(DtensorCliTest, ShardingTextHasTableAndPicture) {
  const Result r = RunTool({"layout", "--mesh", "4x2", "--shape", "18,2",
                            "--placements", "S(0)[1],S(0)[0]"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("placements S(0)[1],S(0)[0]"), std::string::npos);
  // (dp, tp) = (1, 1): rows [9 + 3, 9 + 6).
  EXPECT_NE(r.out.find("3     [1, 1]  [3, 2]       [12, 0]"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("12:15 | 3   |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("empty blocks: ranks 6, 7"), std::string::npos) << r.out;
}

TEST(DtensorCliTest, BadInputExitsWithStatusTwoAndOneLine) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"nosuchcommand"},
      {"layout", "--mesh", "4x2", "--shape", "18,2", "--placements",
       "S(0),S(0)", "--unknown"},
      {"layout", "--mesh", "4by2", "--shape", "18,2", "--placements",
       "S(0),S(0)"},
      {"layout", "--mesh", "4x2", "--shape", "18;2", "--placements",
       "S(0),S(0)"},
      {"layout", "--mesh", "4x2", "--shape", "18,2", "--placements", "S(0"},
      {"layout", "--mesh", "4x2", "--shape", "18,2", "--placements",
       "S(0),S(5)"},
      {"layout", "--mesh", "4x2", "--shape", "18,2", "--placements", "R"},
      {"layout", "--mesh", "4x2", "--shape", "18,2", "--placements",
       "S(0)[1],S(0)[1]"},
      {"layout", "--mesh", "4x2", "--shape", "18,2", "--placements",
       "S(0),S(0)", "--dtype", "float128"},
  };
  for (const auto& args : cases) {
    const Result r = RunTool(args);
    const std::string what = args.empty() ? "(no args)" : args.back();
    EXPECT_EQ(r.status, 2) << what;
    EXPECT_EQ(r.out, "") << what;
    if (!args.empty()) {
      EXPECT_FALSE(r.err.empty()) << what;
      EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    }
  }
}

TEST(DtensorCliTest, HelpExitsZero) {
  const Result r = RunTool({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("layout"), std::string::npos);
  EXPECT_EQ(RunTool({"layout", "--help"}).status, 0);
}

}  // namespace
