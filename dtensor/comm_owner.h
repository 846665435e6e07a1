#ifndef DTENSOR_DTENSOR_COMM_OWNER_H_
#define DTENSOR_DTENSOR_COMM_OWNER_H_

namespace dtensor {

// Who issues the communication recorded on this thread: an opaque owner (a
// module, an optimizer, a phase of a step), the innermost live Scope's.
// CommCounter stamps every event it records with it, so that a report can
// attribute collectives, e.g. `dtensor explain` per module. nn::Module's call
// operator opens a scope with the module, and the gradient tape re-opens the
// scope a call was recorded under while its backward runs.
//
//   CommOwner::Scope scope(&module);  // Collectives issued now: &module's.
//
// The owner is only compared, never dereferenced.
class CommOwner {
 public:
  class Scope {
   public:
    explicit Scope(const void* owner);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const void* previous_;
  };

  // The innermost live scope's owner on this thread; nullptr outside scopes.
  static const void* Current();
};

}  // namespace dtensor

#endif  // DTENSOR_DTENSOR_COMM_OWNER_H_
