#include "dtensor/collectives/multiprocess/arrival_board.h"

#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dtensor {

void ArrivalBoard::Slot::Enter(int64_t sequence, absl::Duration delay) {
  post_at_nanos_.store(
      absl::GetCurrentTimeNanos() + absl::ToInt64Nanoseconds(delay),
      std::memory_order_relaxed);
  sequence_.store(sequence, std::memory_order_release);
}

void ArrivalBoard::Slot::Leave() {
  sequence_.store(-1, std::memory_order_release);
}

ArrivalBoard::ArrivalBoard(StoreClient* client)
    : client_(client), thread_([this] { Run(); }) {}

ArrivalBoard::~ArrivalBoard() {
  stop_.Notify();
  thread_.join();
}

std::shared_ptr<ArrivalBoard::Slot> ArrivalBoard::NewSlot(std::string key) {
  std::shared_ptr<Slot> slot(new Slot(std::move(key)));
  MutexLock lock(&mu_);
  slots_.push_back(slot);
  return slot;
}

void ArrivalBoard::Run() {
  while (!stop_.WaitForNotificationWithTimeout(kTick)) PostOverdue();
}

void ArrivalBoard::PostOverdue() {
  std::vector<std::shared_ptr<Slot>> due;
  const int64_t now = absl::GetCurrentTimeNanos();
  {
    MutexLock lock(&mu_);
    for (auto it = slots_.begin(); it != slots_.end();) {
      std::shared_ptr<Slot> slot = it->lock();
      if (slot == nullptr) {
        it = slots_.erase(it);
        continue;
      }
      ++it;
      const int64_t sequence = slot->sequence_.load(std::memory_order_acquire);
      if (sequence >= 0 && sequence != slot->posted_ &&
          now >= slot->post_at_nanos_.load(std::memory_order_relaxed)) {
        due.push_back(std::move(slot));
      }
    }
  }
  for (const std::shared_ptr<Slot>& slot : due) {
    const int64_t sequence = slot->sequence_.load(std::memory_order_acquire);
    if (sequence < 0) continue;
    // A store that is gone makes the posts fail; the waiting calls report
    // that themselves.
    if (client_->Set(slot->key_, absl::StrCat(sequence)).ok()) {
      slot->posted_ = sequence;
    }
  }
}

absl::StatusOr<std::vector<int64_t>> ArrivalBoard::ReadPosts(
    StoreClient& client, absl::Span<const std::string> keys) {
  absl::StatusOr<std::vector<std::optional<std::string>>> values =
      client.MultiGet(keys);
  if (!values.ok()) return values.status();
  std::vector<int64_t> sequences;
  for (const std::optional<std::string>& value : *values) {
    int64_t sequence = -1;
    if (!value.has_value() || !absl::SimpleAtoi(*value, &sequence)) {
      sequence = -1;
    }
    sequences.push_back(sequence);
  }
  return sequences;
}

}  // namespace dtensor
