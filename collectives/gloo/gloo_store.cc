#include "dtensor/collectives/gloo/gloo_store.h"

#include <utility>

#include "absl/time/time.h"
#include "gloo/common/error.h"

namespace dtensor {
namespace {

[[noreturn]] void Throw(const absl::Status& status) {
  throw gloo::IoException(std::string(status.message()));
}

}  // namespace

GlooStore::GlooStore(StoreClient& client, std::string prefix,
                     std::chrono::milliseconds timeout)
    : client_(client), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status =
      client_.Set(prefix_ + key, absl::string_view(data.data(), data.size()));
  if (!status.ok()) Throw(status);
}

std::vector<char> GlooStore::get(const std::string& key) {
  absl::StatusOr<std::vector<std::string>> values =
      client_.WaitAndGet({prefix_ + key}, absl::FromChrono(timeout_));
  if (!values.ok()) Throw(values.status());
  return std::vector<char>((*values)[0].begin(), (*values)[0].end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  absl::StatusOr<std::vector<std::string>> values =
      client_.WaitAndGet(Prefixed(keys), absl::FromChrono(timeout));
  if (!values.ok()) Throw(values.status());
}

std::vector<std::string> GlooStore::Prefixed(
    const std::vector<std::string>& keys) const {
  std::vector<std::string> prefixed;
  for (const std::string& key : keys) prefixed.push_back(prefix_ + key);
  return prefixed;
}

}  // namespace dtensor
