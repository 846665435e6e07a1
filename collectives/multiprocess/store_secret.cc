#include "dtensor/collectives/multiprocess/store_secret.h"

#include <cstdlib>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "dtensor/base/text_file.h"

namespace dtensor {
namespace {

constexpr int kSecretBytes = 32;
// A secret file holds one line; anything much longer is not one.
constexpr int64_t kMaxSecretFileBytes = 4096;

}  // namespace

absl::StatusOr<std::string> NewStoreSecret() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  std::string bytes(kSecretBytes, '\0');
  if (!urandom.read(bytes.data(), kSecretBytes)) {
    return absl::UnavailableError(
        "cannot read /dev/urandom for the store's secret");
  }
  return absl::BytesToHexString(bytes);
}

absl::StatusOr<std::string> StoreSecretFromEnvironment() {
  const char* secret = std::getenv(kStoreSecretEnv);
  if (secret != nullptr && secret[0] != '\0') return std::string(secret);
  const char* path = std::getenv(kStoreSecretFileEnv);
  if (path == nullptr || path[0] == '\0') return std::string();
  absl::StatusOr<std::string> text = ReadTextFile(path, kMaxSecretFileBytes);
  if (!text.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        kStoreSecretFileEnv, "=", path,
        ": cannot read the store's secret: ", text.status().message()));
  }
  const std::string stripped(absl::StripAsciiWhitespace(*text));
  if (stripped.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        kStoreSecretFileEnv, "=", path, ": the file holds no secret"));
  }
  return stripped;
}

bool SecretsMatch(absl::string_view given, absl::string_view secret) {
  // Every byte of `secret` is compared whatever `given` holds; only the
  // length (not secret) shows in the time.
  unsigned char differ = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    const char g = i < given.size() ? given[i] : '\0';
    differ |= static_cast<unsigned char>(g ^ secret[i]);
  }
  return differ == 0;
}

}  // namespace dtensor
