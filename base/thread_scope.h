#ifndef DTENSOR_BASE_THREAD_SCOPE_H_
#define DTENSOR_BASE_THREAD_SCOPE_H_

#include <algorithm>
#include <iterator>
#include <vector>

namespace dtensor {

// The objects of type T made active on the calling thread by a live
// ThreadScope<T>, innermost last: the recorders (counters, tapes) that code
// deep in a call reports to without being handed them. Scopes nest, of one
// object or of several; each thread (each in-process rank) has its own list.
template <typename T>
class ThreadScope {
 public:
  // Makes `object` active on this thread until destroyed.
  explicit ThreadScope(T& object) : object_(&object) {
    Active().push_back(object_);
  }
  ~ThreadScope() {
    std::vector<T*>& active = Active();
    // The innermost entry: scopes of one object may nest.
    const auto it = std::find(active.rbegin(), active.rend(), object_);
    if (it != active.rend()) active.erase(std::next(it).base());
  }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

  // The active objects of this thread, outermost first.
  static std::vector<T*>& Active() {
    thread_local std::vector<T*> active;
    return active;
  }

 private:
  T* object_;
};

}  // namespace dtensor

#endif  // DTENSOR_BASE_THREAD_SCOPE_H_
