#ifndef DTENSOR_BASE_DEBUG_CHECK_H_
#define DTENSOR_BASE_DEBUG_CHECK_H_

#include <cstdio>
#include <cstdlib>

// DT_DCHECK(condition): the debug check of a documented precondition (a
// "Requires:" line in a header) that the code does not otherwise verify.
// Without NDEBUG (bazel's default fastbuild and dbg modes, hence every test)
// a false condition prints the file, line and condition and aborts: it marks
// a bug in the caller, never bad input, which is always an absl::Status. With
// NDEBUG (-c opt) it compiles to nothing and `condition` is not evaluated.
#ifdef NDEBUG
#define DT_DCHECK(condition) \
  do {                       \
    (void)sizeof(condition); \
  } while (false)
#else
#define DT_DCHECK(condition)                                          \
  do {                                                                \
    if (!(condition)) {                                               \
      std::fprintf(stderr, "%s:%d: DT_DCHECK failed: %s\n", __FILE__, \
                   __LINE__, #condition);                             \
      std::abort();                                                   \
    }                                                                 \
  } while (false)
#endif

#endif  // DTENSOR_BASE_DEBUG_CHECK_H_
