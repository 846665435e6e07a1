#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_SECRET_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_SECRET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dtensor {

// The rendezvous store admits only clients that know the job's secret
// (store_server.h): dtrun makes one per job and gives it to its processes in
// DTENSOR_STORE_SECRET; the nodes of a multi-host job share one, set in
// DTENSOR_STORE_SECRET or in a file named by DTENSOR_STORE_SECRET_FILE (as
// MASTER_ADDR is shared).
inline constexpr char kStoreSecretEnv[] = "DTENSOR_STORE_SECRET";
inline constexpr char kStoreSecretFileEnv[] = "DTENSOR_STORE_SECRET_FILE";

// A new secret: 32 bytes from /dev/urandom, as 64 hex digits.
// Errors: Unavailable when /dev/urandom cannot be read.
absl::StatusOr<std::string> NewStoreSecret();

// The job's secret from the environment: DTENSOR_STORE_SECRET when set and
// not empty, else the contents of the file DTENSOR_STORE_SECRET_FILE names
// (without trailing white space), else "" (a store open to every client).
// Errors: FailedPrecondition naming DTENSOR_STORE_SECRET_FILE and the path
// when the file cannot be read or holds no secret.
absl::StatusOr<std::string> StoreSecretFromEnvironment();

// Whether `given` equals `secret`, in a time that does not depend on where
// they differ (a client cannot guess the secret byte by byte).
bool SecretsMatch(absl::string_view given, absl::string_view secret);

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_SECRET_H_
