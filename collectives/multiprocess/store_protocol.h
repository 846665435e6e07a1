#ifndef DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_PROTOCOL_H_
#define DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_PROTOCOL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dtensor::store {

// The wire format of the rendezvous store (store_server.h, store_client.h):
// frames of a 4-byte little-endian length and that many payload bytes. A
// request payload starts with a Command byte, a response payload with a
// Reply byte; the fields that follow are encoded by FrameWriter.

enum class Command : uint8_t {
  // i64 rank, str secret: the connection belongs to `rank` (its closing
  // marks it exited; -1: an observer) of the job whose secret it is
  // (store_secret.h). A store with a secret answers nothing else before it,
  // and refuses a wrong one.
  kHello = 1,
  // str key, str value.
  kSet = 2,
  // i64 count, count x str key -> count x (u8 present, str value).
  kMultiGet = 3,
  // -> i64 count, count x i64 rank: the ranks whose connection closed.
  kExited = 4,
};

// kError: str message; the store closes the connection after sending it.
enum class Reply : uint8_t { kOk = 0, kError = 1 };

// Frames larger than this are refused: a peer that sends one is broken.
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;

// Appends fields to a frame payload.
class FrameWriter {
 public:
  // A request of `command`, or a reply of `reply`.
  explicit FrameWriter(Command command) { U8(static_cast<uint8_t>(command)); }
  explicit FrameWriter(Reply reply) { U8(static_cast<uint8_t>(reply)); }

  FrameWriter& U8(uint8_t value);
  FrameWriter& I64(int64_t value);
  FrameWriter& Str(absl::string_view value);
  const std::string& payload() const { return payload_; }

 private:
  std::string payload_;
};

// Reads fields from a frame payload; each read fails (returns false) when
// the payload is too short.
class FrameReader {
 public:
  explicit FrameReader(absl::string_view payload) : rest_(payload) {}
  bool U8(uint8_t* value);
  bool I64(int64_t* value);
  bool Str(std::string* value);
  bool done() const { return rest_.empty(); }

 private:
  absl::string_view rest_;
};

// The frame of `payload`: its length prefix and the payload.
std::string Frame(absl::string_view payload);

// Sends all of `bytes` on blocking or non-blocking socket `fd`, waiting for
// it to be writable until `deadline`.
absl::Status SendAll(int fd, absl::string_view bytes, absl::Time deadline);

// Receives one frame's payload from `fd`, waiting until `deadline`.
absl::StatusOr<std::string> ReceiveFrame(int fd, absl::Time deadline);

// A non-blocking TCP socket listening on `host`:`port` ("127.0.0.1",
// "node3", "::1"); port 0 picks a free port.
// Errors: InvalidArgument: an address that does not resolve; Unavailable:
// one that cannot be bound; both name the address.
absl::StatusOr<int> ListenSocket(const std::string& host, int port);

// A non-blocking TCP socket connected to `host`:`port`, or why it could not
// connect by `deadline` (one attempt: a refused connection fails at once).
absl::StatusOr<int> ConnectSocket(const std::string& host, int port,
                                  absl::Time deadline);

// The local port of socket `fd`.
absl::StatusOr<int> LocalPort(int fd);

}  // namespace dtensor::store

#endif  // DTENSOR_COLLECTIVES_MULTIPROCESS_STORE_PROTOCOL_H_
