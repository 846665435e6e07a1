#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_ARRIVAL_BOARD_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_ARRIVAL_BOARD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dtensor/base/mutex.h"
#include "dtensor/collectives/multiprocess/store_client.h"

namespace dtensor {

// Where the ranks of a multi-process job post which collective they are
// waiting in, so that a rank whose call times out can name the peers that
// never arrived ("ranks [3] did not arrive within 1s").
//
// The fast path costs two atomic stores per call: a call enters its slot,
// and a board thread, ticking every kTick, posts to the store only for calls
// that have waited longer than their delay. Fast calls post nothing.
class ArrivalBoard {
 public:
  static constexpr absl::Duration kTick = absl::Milliseconds(10);

  // One rank's slot of one communicator: posts under its own key.
  class Slot {
   public:
    // The call numbered `sequence` starts waiting now: post it once it has
    // waited `delay`.
    void Enter(int64_t sequence, absl::Duration delay);
    // The call has finished.
    void Leave();

   private:
    friend class ArrivalBoard;
    explicit Slot(std::string key) : key_(std::move(key)) {}

    const std::string key_;
    std::atomic<int64_t> sequence_{-1};
    std::atomic<int64_t> post_at_nanos_{0};
    int64_t posted_ = -1;  // Touched by the board thread only.
  };

  // `client` must outlive the board.
  explicit ArrivalBoard(StoreClient* client);
  ArrivalBoard(const ArrivalBoard&) = delete;
  ArrivalBoard& operator=(const ArrivalBoard&) = delete;
  ~ArrivalBoard();

  // A slot posting under `key`; the board drops it when the caller does.
  std::shared_ptr<Slot> NewSlot(std::string key);

  // The sequence last posted under each key; -1 where none was.
  static absl::StatusOr<std::vector<int64_t>> ReadPosts(
      StoreClient& client, absl::Span<const std::string> keys);

 private:
  void Run();
  // Posts the calls that have waited long enough.
  void PostOverdue();

  StoreClient* const client_;
  Mutex mu_;
  std::vector<std::weak_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  Notification stop_;
  std::thread thread_;
};

}  // namespace dtensor

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_ARRIVAL_BOARD_H_
