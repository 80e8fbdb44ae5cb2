// mpi://: the static companion-step transport. All processes share one
// MPI_COMM_WORLD (`srun ... : ...` under Slurm, or `mpirun -np 1 TRAINER :
// -np N goldminer-dw ...`); rank 0 is the trainer, every other rank a
// worker, connected from the start. A frame is one message (tag kTag); an
// empty message says goodbye. MPI cannot survive a killed rank, so this
// transport is for jobs whose workers are fixed (--goldminer=mode=static);
// elastic jobs use UCX.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <set>
#include <thread>

#include "mpi_transport/buffer_pool.h"
#include "mpi_transport/transport_impl.h"

namespace goldminer::transport {
namespace {

constexpr int kTag = 4711;
using Clock = std::chrono::steady_clock;

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

class MpiEndpoint final : public Endpoint {
 public:
  MpiEndpoint(int rank, int size, bool owns_mpi, Options options)
      : rank_(rank), size_(size), owns_mpi_(owns_mpi), options_(options) {
    if (rank_ == 0) {
      for (int r = 1; r < size_; ++r) {
        live_.insert(r);
        Event e;
        e.kind = Event::Kind::kConnected;
        e.peer = static_cast<PeerId>(r);
        events_.push_back(std::move(e));
      }
    } else {
      live_.insert(0);
    }
  }
  ~MpiEndpoint() override {
    // Say goodbye to every live peer, then leave MPI.
    for (int r : live_) MPI_Send(nullptr, 0, MPI_BYTE, r, kTag, MPI_COMM_WORLD);
    if (owns_mpi_) MPI_Finalize();
  }

  std::string address() const override { return "mpi://"; }

  Status send(PeerId peer, const uint8_t* data, size_t size) override {
    const int to = rank_of(peer);
    if (live_.count(to) == 0) return Status::error("mpi: rank " + std::to_string(to) + " is not connected");
    if (size > static_cast<size_t>(INT32_MAX)) return Status::error("mpi: message of " + std::to_string(size) + " bytes is too large");
    MPI_Request req;
    int rc = MPI_Isend(data, static_cast<int>(size), MPI_BYTE, to, kTag, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS) return Status::error("mpi: send to rank " + std::to_string(to) + ": " + mpi_error(rc));
    const auto deadline = Clock::now() + std::chrono::milliseconds(options_.send_timeout_ms);
    for (;;) {
      int done = 0;
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (done) return Status();
      receive_one();  // keep taking messages so two senders never wait on each other
      if (Clock::now() > deadline) {
        MPI_Cancel(&req);
        MPI_Request_free(&req);
        return Status::error("mpi: send to rank " + std::to_string(to) + ": not taken within " +
                             std::to_string(options_.send_timeout_ms) + " ms");
      }
    }
  }

  Expected<std::optional<Event>> poll(int timeout_ms) override {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (!events_.empty()) {
        Event e = std::move(events_.front());
        events_.pop_front();
        return std::optional<Event>(std::move(e));
      }
      if (!receive_one()) {
        if (woken_.exchange(false) || Clock::now() >= deadline) return std::optional<Event>();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  void wake() override { woken_ = true; }

  void disconnect(PeerId peer) override {
    const int r = rank_of(peer);
    if (live_.erase(r)) {
      MPI_Send(nullptr, 0, MPI_BYTE, r, kTag, MPI_COMM_WORLD);
      dropped_.insert(r);
    }
  }

 private:
  int rank_of(PeerId peer) const { return rank_ == 0 ? static_cast<int>(peer) : 0; }

  // Takes one pending message, if any, into a pooled buffer.
  bool receive_one() {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kTag, MPI_COMM_WORLD, &flag, &st);
    if (!flag) return false;
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    const int from = st.MPI_SOURCE;
    auto frame = pool_->take(static_cast<size_t>(count));
    uint8_t scratch = 0;
    MPI_Recv(frame ? frame->mutable_data() : &scratch, frame ? count : 0, MPI_BYTE, from, kTag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    if (dropped_.count(from) || live_.count(from) == 0) return true;  // after our goodbye
    Event e;
    e.peer = rank_ == 0 ? static_cast<PeerId>(from) : 0;
    if (count == 0) {
      live_.erase(from);
      e.kind = Event::Kind::kDisconnected;
      e.reason = "rank " + std::to_string(from) + " said goodbye";
    } else if (static_cast<uint64_t>(count) > options_.max_message || !frame) {
      disconnect(e.peer);
      e.kind = Event::Kind::kDisconnected;
      e.reason = "message of " + std::to_string(count) + " bytes refused";
    } else {
      e.kind = Event::Kind::kMessage;
      e.frame = std::move(frame);
    }
    events_.push_back(std::move(e));
    return true;
  }

  int rank_, size_;
  bool owns_mpi_;
  Options options_;
  std::set<int> live_, dropped_;
  std::deque<Event> events_;
  std::atomic<bool> woken_{false};
  std::shared_ptr<BufferPool> pool_ = BufferPool::create(size_t{1} << 30, options_.memory);
};

Expected<std::unique_ptr<Endpoint>> open_mpi(bool trainer, const Options& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return Status::error("mpi: MPI_Init_thread: " + mpi_error(rc));
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (trainer && rank != 0)
    return Status::error("mpi: the trainer must be rank 0 of MPI_COMM_WORLD, this process is rank " +
                         std::to_string(rank));
  if (!trainer && rank == 0)
    return Status::error("mpi: a data worker cannot be rank 0 of MPI_COMM_WORLD (rank 0 is the trainer)");
  return std::unique_ptr<Endpoint>(new MpiEndpoint(rank, size, !initialized, options));
}

}  // namespace

Expected<std::unique_ptr<Endpoint>> listen_mpi(const Options& options) { return open_mpi(true, options); }
Expected<std::unique_ptr<Endpoint>> connect_mpi(const Options& options) { return open_mpi(false, options); }

}  // namespace goldminer::transport
