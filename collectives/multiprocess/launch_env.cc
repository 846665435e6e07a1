#include "dtensor/collectives/multiprocess/launch_env.h"

#include <cstdlib>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dtensor/collectives/multiprocess/store_secret.h"

namespace dtensor {
namespace {

std::optional<std::string> Lookup(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

absl::StatusOr<std::string> Required(const char* name) {
  std::optional<std::string> value = Lookup(name);
  if (!value.has_value() || value->empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "environment variable ", name,
        " is not set (start the processes with dtrun, or set RANK, "
        "WORLD_SIZE, MASTER_ADDR and MASTER_PORT)"));
  }
  return *value;
}

// The integer in `text` (variable `name`), within [low, high].
absl::StatusOr<int64_t> ParseInRange(const char* name, const std::string& text,
                                     int64_t low, int64_t high) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < low || value > high) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "=\"", text,
                     "\" is not an integer in [", low, ", ", high, "]"));
  }
  return value;
}

}  // namespace

absl::StatusOr<LaunchEnv> LaunchEnvFromEnvironment() {
  constexpr int64_t kMaxRanks = int64_t{1} << 24;
  LaunchEnv env;
  absl::StatusOr<std::string> text = Required(kWorldSizeEnv);
  if (!text.ok()) return text.status();
  absl::StatusOr<int64_t> value =
      ParseInRange(kWorldSizeEnv, *text, 1, kMaxRanks);
  if (!value.ok()) return value.status();
  env.world_size = *value;

  text = Required(kRankEnv);
  if (!text.ok()) return text.status();
  value = ParseInRange(kRankEnv, *text, 0, env.world_size - 1);
  if (!value.ok()) return value.status();
  env.rank = *value;

  const std::optional<std::string> local_world = Lookup(kLocalWorldSizeEnv);
  env.local_world_size = env.world_size;
  if (local_world.has_value()) {
    value = ParseInRange(kLocalWorldSizeEnv, *local_world, 1, env.world_size);
    if (!value.ok()) return value.status();
    env.local_world_size = *value;
  }
  const std::optional<std::string> local_rank = Lookup(kLocalRankEnv);
  env.local_rank = env.rank;
  if (local_rank.has_value()) {
    value =
        ParseInRange(kLocalRankEnv, *local_rank, 0, env.local_world_size - 1);
    if (!value.ok()) return value.status();
    env.local_rank = *value;
  }

  text = Required(kMasterAddrEnv);
  if (!text.ok()) return text.status();
  env.master_addr = *text;
  text = Required(kMasterPortEnv);
  if (!text.ok()) return text.status();
  value = ParseInRange(kMasterPortEnv, *text, 1, 65535);
  if (!value.ok()) return value.status();
  env.master_port = static_cast<int>(*value);

  env.agent_store = Lookup(kAgentStoreEnv).value_or("") == "1";
  absl::StatusOr<std::string> secret = StoreSecretFromEnvironment();
  if (!secret.ok()) return secret.status();
  env.store_secret = *std::move(secret);
  return env;
}

}  // namespace dtensor
