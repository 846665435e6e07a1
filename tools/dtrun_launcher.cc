#include "tools/dtrun_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "dtensor/collectives/multiprocess/launch_env.h"
#include "dtensor/collectives/multiprocess/store_secret.h"
#include "dtensor/collectives/multiprocess/store_server.h"

extern char** environ;

namespace dtensor {
namespace {

// How often the launcher looks at its processes when they print nothing.
constexpr int kPollMillis = 20;
// How long output is drained after every process has ended (a grandchild
// may still hold a pipe open).
constexpr absl::Duration kDrainLimit = absl::Seconds(1);

std::atomic<int> received_signal{0};

void RecordSignal(int signal) { received_signal.store(signal); }

// Installs RecordSignal for SIGINT, SIGTERM and SIGHUP while alive.
class SignalForwarding {
 public:
  explicit SignalForwarding(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    received_signal.store(0);
    struct sigaction action {};
    action.sa_handler = RecordSignal;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &action, &previous_[i]);
  }
  ~SignalForwarding() {
    if (!enabled_) return;
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  }

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  const bool enabled_;
  struct sigaction previous_[3];
};

void WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;  // The reader went away: drop the output.
    bytes.remove_prefix(written);
  }
}

// One output stream of one process: whole lines go out with the prefix.
class LineForwarder {
 public:
  LineForwarder(int read_fd, int out_fd, std::string prefix)
      : read_fd_(read_fd), out_fd_(out_fd), prefix_(std::move(prefix)) {}
  ~LineForwarder() { Close(); }

  int fd() const { return read_fd_; }
  bool open() const { return read_fd_ >= 0; }

  // Reads what is there; at end of file, flushes a partial last line.
  void Read() {
    char buffer[1 << 16];
    while (true) {
      const ssize_t got = ::read(read_fd_, buffer, sizeof(buffer));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (got <= 0) {
        if (!partial_.empty()) Emit(partial_);
        partial_.clear();
        Close();
        return;
      }
      partial_.append(buffer, got);
      size_t start = 0;
      for (size_t end; (end = partial_.find('\n', start)) != std::string::npos;
           start = end + 1) {
        Emit(absl::string_view(partial_).substr(start, end - start));
      }
      partial_.erase(0, start);
    }
  }

  void Close() {
    if (read_fd_ >= 0) ::close(read_fd_);
    read_fd_ = -1;
  }

 private:
  void Emit(absl::string_view line) {
    WriteAll(out_fd_, absl::StrCat(prefix_, line, "\n"));
  }

  int read_fd_;
  const int out_fd_;
  const std::string prefix_;
  std::string partial_;
};

struct Child {
  pid_t pid = -1;
  bool running = false;
  bool terminated = false;  // By the launcher.
  int exit_code = 0;
  std::unique_ptr<LineForwarder> out;
  std::unique_ptr<LineForwarder> err;
};

// The environment of local process `local_rank`: ours, with the launcher's
// variables set.
std::vector<std::string> ChildEnvironment(const LaunchOptions& options,
                                          int64_t local_rank, int port,
                                          const std::string& secret) {
  std::map<std::string, std::string> values;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const absl::string_view text(*entry);
    const size_t equals = text.find('=');
    if (equals == absl::string_view::npos) continue;
    values[std::string(text.substr(0, equals))] =
        std::string(text.substr(equals + 1));
  }
  values[kRankEnv] =
      absl::StrCat(options.node_rank * options.nproc + local_rank);
  values[kWorldSizeEnv] = absl::StrCat(options.nnodes * options.nproc);
  values[kLocalRankEnv] = absl::StrCat(local_rank);
  values[kLocalWorldSizeEnv] = absl::StrCat(options.nproc);
  values[kMasterAddrEnv] = options.master_addr;
  values[kMasterPortEnv] = absl::StrCat(port);
  values[kAgentStoreEnv] = options.host_store ? "1" : "0";
  values[kStoreSecretEnv] = secret;
  for (const auto& [name, value] : options.extra_env) values[name] = value;
  std::vector<std::string> environment;
  for (const auto& [name, value] : values) {
    environment.push_back(absl::StrCat(name, "=", value));
  }
  return environment;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Starts local process `local_rank`, its output going to new pipes.
absl::StatusOr<Child> Spawn(const LaunchOptions& options, int64_t local_rank,
                            int port, const std::string& secret, int out_fd,
                            int err_fd) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t signals;
  sigemptyset(&signals);
  posix_spawnattr_setsigmask(&attributes, &signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGPIPE);
  posix_spawnattr_setsigdefault(&attributes, &signals);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP |
                                            POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> arguments = options.command;
  std::vector<std::string> environment =
      ChildEnvironment(options, local_rank, port, secret);
  std::vector<char*> argv = CStrings(arguments);
  std::vector<char*> envp = CStrings(environment);
  Child child;
  const int error = posix_spawnp(&child.pid, argv[0], &actions, &attributes,
                                 argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (error != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot run \"", options.command[0], "\": ", std::strerror(error)));
  }
  ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  const std::string prefix = absl::StrCat(
      "[rank ", options.node_rank * options.nproc + local_rank, "] ");
  child.running = true;
  child.out = std::make_unique<LineForwarder>(out_pipe[0], out_fd, prefix);
  child.err = std::make_unique<LineForwarder>(err_pipe[0], err_fd, prefix);
  return child;
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

// Runs the started children to their end; see Launch.
class Supervisor {
 public:
  Supervisor(const LaunchOptions& options, std::vector<Child> children)
      : options_(options), children_(std::move(children)) {}

  LaunchResult Run() {
    const absl::Time start = absl::Now();
    std::optional<absl::Time> ended;
    while (true) {
      PumpOutput();
      Reap();
      if (const int signal = received_signal.load();
          options_.forward_signals && signal != 0 && !result_.interrupted) {
        result_.interrupted = true;
        TerminateAll();
      }
      if (options_.timeout.has_value() && !result_.timed_out &&
          absl::Now() - start > *options_.timeout) {
        result_.timed_out = true;
        TerminateAll();
      }
      if (terminate_sent_.has_value() &&
          absl::Now() - *terminate_sent_ > options_.kill_grace) {
        KillAll();
      }
      if (AnyRunning()) continue;
      if (!ended.has_value()) ended = absl::Now();
      if (!AnyOutputOpen() || absl::Now() - *ended > kDrainLimit) break;
    }
    for (Child& child : children_) {
      child.out->Read();
      child.err->Read();
      result_.exit_codes.push_back(child.exit_code);
    }
    return result_;
  }

 private:
  void PumpOutput() {
    std::vector<pollfd> polled;
    std::vector<LineForwarder*> forwarders;
    for (Child& child : children_) {
      for (LineForwarder* forwarder : {child.out.get(), child.err.get()}) {
        if (!forwarder->open()) continue;
        polled.push_back({forwarder->fd(), POLLIN, 0});
        forwarders.push_back(forwarder);
      }
    }
    if (polled.empty()) {
      ::poll(nullptr, 0, kPollMillis);
      return;
    }
    if (::poll(polled.data(), polled.size(), kPollMillis) <= 0) return;
    for (size_t i = 0; i < polled.size(); ++i) {
      if (polled[i].revents != 0) forwarders[i]->Read();
    }
  }

  void Reap() {
    for (size_t i = 0; i < children_.size(); ++i) {
      Child& child = children_[i];
      if (!child.running) continue;
      int status = 0;
      if (::waitpid(child.pid, &status, WNOHANG) != child.pid) continue;
      child.running = false;
      child.exit_code = ExitCodeOf(status);
      if (child.exit_code == 0 || child.terminated) continue;
      if (!result_.first_failure.has_value()) {
        result_.first_failure = static_cast<int64_t>(i);
        if (options_.terminate_on_failure) TerminateAll();
      }
    }
  }

  void TerminateAll() {
    for (Child& child : children_) {
      if (!child.running) continue;
      child.terminated = true;
      ::kill(-child.pid, SIGTERM);
    }
    if (!terminate_sent_.has_value()) terminate_sent_ = absl::Now();
  }

  void KillAll() {
    for (Child& child : children_) {
      if (child.running) ::kill(-child.pid, SIGKILL);
    }
  }

  bool AnyRunning() const {
    for (const Child& child : children_) {
      if (child.running) return true;
    }
    return false;
  }

  bool AnyOutputOpen() const {
    for (const Child& child : children_) {
      if (child.out->open() || child.err->open()) return true;
    }
    return false;
  }

  const LaunchOptions& options_;
  std::vector<Child> children_;
  LaunchResult result_;
  std::optional<absl::Time> terminate_sent_;
};

}  // namespace

int LaunchResult::ExitCode() const {
  if (first_failure.has_value()) {
    const int code = exit_codes[*first_failure];
    return code != 0 ? code : 1;
  }
  if (interrupted) return 130;
  if (timed_out) return 124;
  for (int code : exit_codes) {
    if (code != 0) return code;
  }
  return 0;
}

absl::Status CheckLaunchOptions(const LaunchOptions& options) {
  if (options.nproc < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nproc must be at least 1, got ", options.nproc));
  }
  if (options.nnodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nnodes must be at least 1, got ", options.nnodes));
  }
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node-rank ", options.node_rank, " is not in [0, ",
                     options.nnodes, ")"));
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--master-port ", options.master_port, " is not in [0, 65535]"));
  }
  if (options.master_port == 0 && options.nnodes > 1) {
    return absl::InvalidArgumentError(
        "--master-port is required with more than one node");
  }
  if (options.master_port == 0 && !options.host_store) {
    return absl::InvalidArgumentError(
        "a port is required when rank 0 hosts the store");
  }
  if (options.master_addr.empty()) {
    return absl::InvalidArgumentError("--master-addr is empty");
  }
  if (options.command.empty() || options.command[0].empty()) {
    return absl::InvalidArgumentError("no program to run");
  }
  return absl::OkStatus();
}

namespace {

// The job's secret (LaunchOptions::store_secret).
absl::StatusOr<std::string> JobSecret(const LaunchOptions& options) {
  if (!options.store_secret.empty()) return options.store_secret;
  absl::StatusOr<std::string> inherited = StoreSecretFromEnvironment();
  if (!inherited.ok() || !inherited->empty()) return inherited;
  if (options.nnodes > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("a job of ", options.nnodes,
                     " nodes needs one store secret on every "
                     "node: set ",
                     kStoreSecretEnv,
                     " (e.g. to the output of `head -c 32 "
                     "/dev/urandom | od -An -tx1 | tr -d ' \\n'`) or ",
                     kStoreSecretFileEnv, " to a file that holds it"));
  }
  return NewStoreSecret();
}

}  // namespace

absl::StatusOr<LaunchResult> Launch(const LaunchOptions& options, int out_fd,
                                    int err_fd) {
  absl::Status valid = CheckLaunchOptions(options);
  if (!valid.ok()) return valid;
  absl::StatusOr<std::string> secret = JobSecret(options);
  if (!secret.ok()) return secret.status();
  std::unique_ptr<StoreServer> store;
  int port = options.master_port;
  if (options.node_rank == 0 && options.host_store) {
    absl::StatusOr<std::unique_ptr<StoreServer>> started =
        StoreServer::Start(options.master_addr, port, *secret);
    if (!started.ok()) return started.status();
    store = *std::move(started);
    port = store->port();
  }
  SignalForwarding forwarding(options.forward_signals);
  std::vector<Child> children;
  for (int64_t local_rank = 0; local_rank < options.nproc; ++local_rank) {
    absl::StatusOr<Child> child =
        Spawn(options, local_rank, port, *secret, out_fd, err_fd);
    if (!child.ok()) {
      // End the processes already started before reporting.
      LaunchOptions ending = options;
      ending.timeout = absl::ZeroDuration();
      Supervisor(ending, std::move(children)).Run();
      return child.status();
    }
    children.push_back(*std::move(child));
  }
  return Supervisor(options, std::move(children)).Run();
}

}  // namespace dtensor
