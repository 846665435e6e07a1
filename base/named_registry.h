#ifndef DTENSOR_BASE_NAMED_REGISTRY_H_
#define DTENSOR_BASE_NAMED_REGISTRY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/mutex.h"

namespace dtensor {

// Values of type T by name, in registration order: what the registries of the
// extension points that programs name by a string keep (backends by their
// --backend name, parallel styles by their plan-file name). `kind` says what
// a value is in messages ("backend", "style"). Thread-safe.
template <typename T>
class NamedRegistry {
 public:
  explicit NamedRegistry(std::string kind) : kind_(std::move(kind)) {}
  NamedRegistry(const NamedRegistry&) = delete;
  NamedRegistry& operator=(const NamedRegistry&) = delete;

  // Adds `value` under `name`.
  // Errors: InvalidArgument: an empty name; AlreadyExists: a name already
  //   registered.
  absl::Status Register(std::string name, T value) {
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind_, " registry: empty ", kind_, " name"));
    }
    MutexLock lock(&mu_);
    for (const auto& entry : entries_) {
      if (entry.first == name) {
        return absl::AlreadyExistsError(absl::StrCat(
            kind_, " registry: ", kind_, " \"", name,
            "\" is already registered"));
      }
    }
    entries_.emplace_back(std::move(name), std::move(value));
    return absl::OkStatus();
  }

  // A copy of the value under `name`.
  // Errors: NotFound naming `name` and the registered names.
  absl::StatusOr<T> Find(absl::string_view name) const {
    {
      MutexLock lock(&mu_);
      for (const auto& entry : entries_) {
        if (entry.first == name) return entry.second;
      }
    }
    return absl::NotFoundError(absl::StrCat("unknown ", kind_, " \"", name,
                                            "\" (registered: ",
                                            absl::StrJoin(Names(), ", "), ")"));
  }

  // Every registered name, in registration order.
  std::vector<std::string> Names() const {
    MutexLock lock(&mu_);
    std::vector<std::string> names;
    for (const auto& entry : entries_) names.push_back(entry.first);
    return names;
  }

 private:
  const std::string kind_;
  mutable Mutex mu_;
  std::vector<std::pair<std::string, T>> entries_ ABSL_GUARDED_BY(mu_);
};

// A new registry of type R holding what `register_builtins` registers: what a
// registry's Global() makes once (and never destroys, so that registrations
// from static initializers and exit-time code stay valid).
template <typename R>
R* NewRegistryWith(void (*register_builtins)(R&)) {
  auto* registry = new R();
  register_builtins(*registry);
  return registry;
}

// Registers a value in Registry::Global() when constructed; a namespace-scope
// static of one makes a library's extension known to every program the
// library is linked into (mark the cc_library `alwayslink = True`).
// Registration never aborts: status() says whether it succeeded.
template <typename Registry, typename Value>
class GlobalRegistration {
 public:
  GlobalRegistration(std::string name, Value value)
      : status_(Registry::Global().Register(std::move(name),
                                            std::move(value))) {}
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

}  // namespace dtensor

#endif  // DTENSOR_BASE_NAMED_REGISTRY_H_
