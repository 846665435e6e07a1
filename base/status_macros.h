#ifndef DTENSOR_BASE_STATUS_MACROS_H_
#define DTENSOR_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// DT_RETURN_IF_ERROR(expr): returns the status of `expr` from the enclosing
// function when it is not OK.
#define DT_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status dt_status_ = (expr);      \
    if (!dt_status_.ok()) return dt_status_; \
  } while (false)

// DT_ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (an absl::StatusOr<T>);
// returns its status when not OK, else assigns the value to `lhs`, which may
// be a declaration (`auto x`).
#define DT_ASSIGN_OR_RETURN(lhs, expr) \
  DT_ASSIGN_OR_RETURN_IMPL_(DT_CONCAT_(dt_statusor_, __LINE__), lhs, expr)

#define DT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  if (!statusor.ok()) return statusor.status();        \
  lhs = *std::move(statusor)

#define DT_CONCAT_INNER_(a, b) a##b
#define DT_CONCAT_(a, b) DT_CONCAT_INNER_(a, b)

#endif  // DTENSOR_BASE_STATUS_MACROS_H_
