// The dtrun launcher binary: the environment and output of its processes,
// terminating the others when one fails, exit codes, bad arguments, and a
// real Gloo job.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace dtensor {
namespace {

constexpr char kDtrun[] = "tools/dtrun";

struct DtrunRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  absl::Duration took;
};

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Runs dtrun with `args`, its output captured in files.
DtrunRun RunDtrun(const std::vector<std::string>& args) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const std::string out_path = dir + "/dtrun_out";
  const std::string err_path = dir + "/dtrun_err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> argv_strings = {kDtrun};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);
  DtrunRun run;
  const absl::Time start = absl::Now();
  pid_t pid = -1;
  const int error =
      posix_spawn(&pid, kDtrun, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(error, 0) << "cannot run " << kDtrun;
  if (error != 0) return run;
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.took = absl::Now() - start;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  return run;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

bool HasLine(const std::string& text, const std::string& line) {
  for (const std::string& candidate : Lines(text)) {
    if (candidate == line) return true;
  }
  return false;
}

TEST(DtrunTest, SetsTheEnvironmentAndPrefixesEveryLine) {
  const DtrunRun run = RunDtrun(
      {"--nproc", "3", "--", "/bin/sh", "-c",
       "echo env $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR "
       "$DTENSOR_AGENT_STORE; echo port $MASTER_PORT; echo oops >&2; "
       "printf partial"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  std::string port;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string prefix = absl::StrCat("[rank ", rank, "] ");
    EXPECT_TRUE(HasLine(run.out, absl::StrCat(prefix, "env ", rank, " 3 ", rank,
                                              " 3 127.0.0.1 1")))
        << run.out;
    EXPECT_TRUE(HasLine(run.out, prefix + "partial")) << run.out;
    EXPECT_TRUE(HasLine(run.err, prefix + "oops")) << run.err;
  }
  // Every rank is told the same (free) store port.
  int ports_seen = 0;
  for (const std::string& line : Lines(run.out)) {
    const size_t at = line.find("] port ");
    if (at == std::string::npos) continue;
    const std::string value = line.substr(at + 7);
    int number = 0;
    EXPECT_TRUE(absl::SimpleAtoi(value, &number) && number > 0) << line;
    if (port.empty()) port = value;
    EXPECT_EQ(value, port);
    ++ports_seen;
  }
  EXPECT_EQ(ports_seen, 3);
  EXPECT_EQ(Lines(run.out).size(), 9u) << run.out;
}

// Sets an environment variable of this process (which dtrun inherits) for
// the scope's lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

TEST(DtrunTest, GivesEveryRankTheJobsNewSecret) {
  const std::string echo = "echo secret $DTENSOR_STORE_SECRET";
  const DtrunRun first =
      RunDtrun({"--nproc", "2", "--", "/bin/sh", "-c", echo});
  const DtrunRun second =
      RunDtrun({"--nproc", "1", "--", "/bin/sh", "-c", echo});
  EXPECT_EQ(first.exit_code, 0) << first.err;
  std::string secret;
  for (const std::string& line : Lines(first.out)) {
    const std::string value = line.substr(line.find("secret ") + 7);
    EXPECT_EQ(value.size(), 64u) << line;
    if (secret.empty()) secret = value;
    EXPECT_EQ(value, secret);
  }
  // Another job, another secret.
  EXPECT_FALSE(secret.empty());
  EXPECT_FALSE(absl::StrContains(second.out, secret)) << second.out;
}

TEST(DtrunTest, SeveralNodesNeedASharedSecret) {
  const std::vector<std::string> args = {"--nproc",
                                         "1",
                                         "--nnodes",
                                         "2",
                                         "--node-rank",
                                         "1",
                                         "--master-addr",
                                         "node0",
                                         "--master-port",
                                         "29555",
                                         "--",
                                         "/bin/sh",
                                         "-c",
                                         "echo secret $DTENSOR_STORE_SECRET"};
  const DtrunRun without = RunDtrun(args);
  EXPECT_NE(without.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(without.err, "DTENSOR_STORE_SECRET_FILE"))
      << without.err;
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/job_secret";
  std::ofstream(path) << "shared-by-the-nodes\n";
  ScopedEnv file("DTENSOR_STORE_SECRET_FILE", path);
  const DtrunRun with = RunDtrun(args);
  EXPECT_EQ(with.exit_code, 0) << with.err;
  EXPECT_TRUE(HasLine(with.out, "[rank 1] secret shared-by-the-nodes"))
      << with.out;
}

TEST(DtrunTest, NumbersTheRanksOfLaterNodes) {
  ScopedEnv secret("DTENSOR_STORE_SECRET", "shared-by-the-nodes");
  const DtrunRun run = RunDtrun(
      {"--nproc", "2", "--nnodes", "3", "--node-rank", "1", "--master-addr",
       "node0", "--master-port", "29555", "--", "/bin/sh", "-c",
       "echo $RANK $WORLD_SIZE $LOCAL_RANK "
       "$LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(HasLine(run.out, "[rank 2] 2 6 0 2 node0 29555")) << run.out;
  EXPECT_TRUE(HasLine(run.out, "[rank 3] 3 6 1 2 node0 29555")) << run.out;
}

TEST(DtrunTest, OneFailureTerminatesTheOthersAndGivesItsExitCode) {
  const DtrunRun run =
      RunDtrun({"--nproc", "3", "--", "/bin/sh", "-c",
                "if [ \"$RANK\" = 1 ]; then echo bye; exit 3; fi; sleep 30"});
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_LT(run.took, absl::Seconds(10));
  EXPECT_TRUE(HasLine(run.out, "[rank 1] bye")) << run.out;
  EXPECT_TRUE(absl::StrContains(
      run.err,
      "dtrun: rank 1 failed with exit code 3; terminated the other "
      "processes"))
      << run.err;
}

TEST(DtrunTest, ProcessesThatIgnoreTerminationAreKilled) {
  const DtrunRun run = RunDtrun(
      {"--nproc", "2", "--", "/bin/sh", "-c",
       "if [ \"$RANK\" = 0 ]; then sleep 0.5; exit 5; fi; trap '' TERM; "
       "sleep 30"});
  EXPECT_EQ(run.exit_code, 5);
  // SIGTERM was ignored: SIGKILL ended the other after the 3 s grace.
  EXPECT_GE(run.took, absl::Seconds(3));
  EXPECT_LT(run.took, absl::Seconds(10));
}

TEST(DtrunTest, ASignalEndingAProcessGivesItsShellExitCode) {
  const DtrunRun run =
      RunDtrun({"--nproc", "1", "--", "/bin/sh", "-c", "kill -9 $$"});
  EXPECT_EQ(run.exit_code, 128 + 9);
}

TEST(DtrunTest, BadArgumentsGiveOneLineAndExitCode2) {
  const std::vector<std::vector<std::string>> cases = {
      {"--nproc", "0", "--", "true"},
      {"--nproc", "x", "--", "true"},
      {"--bogus", "1", "--", "true"},
      {"--nproc", "2"},
      {"--nnodes", "2", "--", "true"},
      {"--nnodes", "2", "--node-rank", "2", "--master-port", "1234", "--",
       "true"},
      {"--master-port", "70000", "--", "true"},
      {"--", "/no/such/program"},
  };
  for (const std::vector<std::string>& args : cases) {
    const DtrunRun run = RunDtrun(args);
    const std::string shown = absl::StrJoin(args, " ");
    EXPECT_EQ(run.exit_code, 2) << shown;
    EXPECT_TRUE(run.out.empty()) << shown << ": " << run.out;
    ASSERT_EQ(Lines(run.err).size(), 1u) << shown << ": " << run.err;
    EXPECT_TRUE(absl::StartsWith(run.err, "dtrun: ")) << run.err;
  }
}

TEST(DtrunTest, RunsAGlooJob) {
  const DtrunRun run =
      RunDtrun({"--nproc", "2", "--", "tests/collectives/collective_worker",
                "gloo", "smoke"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_TRUE(HasLine(run.out, "[rank 0] rank 0 of 2: sum 3")) << run.out;
  EXPECT_TRUE(HasLine(run.out, "[rank 1] rank 1 of 2: sum 3")) << run.out;
}

}  // namespace
}  // namespace dtensor
