#include "dtensor/comm_owner.h"

namespace dtensor {
namespace {

thread_local const void* current_owner = nullptr;

}  // namespace

CommOwner::Scope::Scope(const void* owner) : previous_(current_owner) {
  current_owner = owner;
}

CommOwner::Scope::~Scope() { current_owner = previous_; }

const void* CommOwner::Current() { return current_owner; }

}  // namespace dtensor
