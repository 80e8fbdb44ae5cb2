// goldminer-dw's producers (internal to dw_daemon/worker.cc): the threads
// that run the worker program over each leased split and queue its batches
// for the connection thread (producer.cc), and the state they share with
// it. Included by worker.cc and producer.cc only; the connection to the
// trainer (handshake, leases, credits, sending) stays in worker.cc.
#ifndef GOLDMINER_DW_DAEMON_PRODUCER_H_
#define GOLDMINER_DW_DAEMON_PRODUCER_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "dw_daemon/worker.h"
#include "gmcore/lease_table.h"
#include "gmcore/log.h"
#include "gmcore/stream_config.h"
#include "mpi_transport/transport.h"

namespace goldminer::dw::producer_internal {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// How long a draining worker waits for grants of leases it asked for.
constexpr double kGrantGrace_s = 1.0;

// The most of a failed split's cause sent to the trainer (bytes).
constexpr size_t kMaxFailureText = 4096;

inline uint64_t batch_seed(uint64_t split_seed, uint32_t sequence) {
  return LeaseTable::split_seed(split_seed, sequence, 0x5eed);
}

// What producers hand to the connection thread, in order.
struct Outgoing {
  enum class Kind { kBatch, kReturn, kError } kind = Kind::kBatch;
  std::unique_ptr<wire::BatchWriter> batch;
  bool last_of_split = false;
  uint64_t split_id = 0;
  std::string message;  // kReturn reason, kError text
  bool failed = false;  // kReturn: the split failed here (wire::LeaseReturn::failed)
};

// `s` with `context` appended to its message, of the same kind.
inline Status with_context(const Status& s, const std::string& context) {
  return s.is_environment_error() ? Status::environment_error(s.message() + context)
                                  : Status::error(s.message() + context);
}

// State shared by the connection thread and the producers.
struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<wire::LeaseGrant> leases;  // granted, not started
  std::deque<Outgoing> outbox;
  size_t outbox_limit = 2;
  std::vector<std::unique_ptr<wire::BatchWriter>> spare;  // writers to reuse
  bool draining = false;  // finish the batch in hand, return leases
  bool quit = false;      // producers exit now
  size_t busy = 0;        // producers working on a split
  // Ordered (StreamConfig::ordered): the trainer delivers splits in the
  // epoch's order (LeaseGrant::rank), so the first split in hand in that
  // order is the one it may be waiting for. Producers start it first and
  // may always queue its batches; the connection thread sends them first.
  bool ordered = false;
  // Splits leased and not yet finished or returned: (epoch, rank) -> id.
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> in_hand;
  std::optional<uint64_t> first_in_hand() const {
    if (in_hand.empty()) return std::nullopt;
    return in_hand.begin()->second;
  }
  void release(uint64_t split_id) {
    for (auto it = in_hand.begin(); it != in_hand.end(); ++it)
      if (it->second == split_id) {
        in_hand.erase(it);
        return;
      }
  }
  std::function<void()> wake;  // wakes the connection thread's poll()
  // Room for a batch in the transport's shared memory (Endpoint::reserve).
  std::function<std::unique_ptr<wire::FrameStorage>(size_t)> reserve;
  // Connection thread only (send completions run there too):
  // Batches handed to send_async and not completed (transport.h says how
  // many and why). Sending asynchronously lets this thread serve credits,
  // leases and heartbeats while the trainer takes a batch.
  transport::SendWindow in_flight;
  std::string send_error;  // the first failed batch send
};

class Producer {
 public:
  Producer(Shared* shared, const readers::DatasetConfig* dataset, const StreamConfig* stream,
           WorkerProgram* program)
      : s_(shared), dataset_(dataset), stream_(stream), program_(program) {}

  // Takes leased splits and works each until the worker drains or quits.
  void run();

 private:
  // Pushes `o` once the outbox has room (ordered: the first split in
  // hand has twice the room, so that its batches need not wait behind
  // later splits' that have no credit yet); false if the worker is quitting.
  bool push(Outgoing o);

  std::unique_ptr<wire::BatchWriter> writer();  // a spare one, or a new one
  bool draining();
  // Queues the split's return to the trainer (unfinished, not failed).
  Status give_back(uint64_t split_id, const std::string& why);
  // The split's batches, read and run through the program, queued in order.
  Status work(const wire::LeaseGrant& g);

  // A program that makes the split's batches itself: each as it comes,
  // from the first not yet delivered, then an empty last one.
  Status work_generated(const wire::LeaseGrant& g, const readers::SplitRange& range);

  // Queues a made batch of g's split for sending. False: stop working on
  // the split, with *why the error (OK: the worker is stopping).
  bool queue(const wire::LeaseGrant& g, bool last, Expected<std::unique_ptr<wire::BatchWriter>> made, Status* why);

  // A read batch, through the program when there is one, as a wire batch.
  Expected<std::unique_ptr<wire::BatchWriter>> make_batch(const wire::LeaseGrant& g, uint32_t sequence, bool last,
                                                         const readers::Batch& b);

  // The wire batch of `views` plus the sample ids (file index, record).
  Expected<std::unique_ptr<wire::BatchWriter>> frame(const wire::LeaseGrant& g, uint32_t sequence, bool last,
                                                    const std::vector<wire::TensorView>& views,
                                                    const std::vector<uint64_t>& records, uint64_t bad_records);

  Shared* s_;
  const readers::DatasetConfig* dataset_;
  const StreamConfig* stream_;
  WorkerProgram* program_;
};

}  // namespace goldminer::dw::producer_internal

#endif  // GOLDMINER_DW_DAEMON_PRODUCER_H_
