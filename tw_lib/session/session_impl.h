// Session::Impl (include/goldminer/session.h), shared by the files of the
// trainer session: session.cc (creation, the training loop's calls),
// session_loop.cc (the loop thread: worker admission, leases, batches,
// credits) and session_elastic.cc (the elastic thread). Internal to
// libgoldminer_session.
//
// One background thread, the loop, owns the endpoint, the lease table and
// the worker records; the consumer thread (the training loop) takes batches
// from a bounded queue. They share only the queue, the credit returns and
// the counters, under mu_.
#ifndef GOLDMINER_TW_LIB_SESSION_IMPL_H_
#define GOLDMINER_TW_LIB_SESSION_IMPL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmcore/auth.h"
#include "gmcore/reorder_buffer.h"
#include "goldminer/session.h"
#include "mpi_transport/transport.h"
#include "readers/reader.h"
#include "sched/elastic.h"

namespace goldminer {

// "0.3", "60": a timeout as the caller gave it, for messages.
std::string seconds_text(double s);
// Why the job's data workers never came, when spank_goldminer.so could not
// submit their companion job (o.companion_job_error), as a suffix for the
// messages of waits that timed out; "" otherwise.
std::string companion_job_failure(const SessionOptions& o);
// Where the companion job o.companion_job stands, as squeue tells it
// ("; companion job 12 is PENDING (Resources)"), as a suffix for messages;
// "" when there is none. Runs squeue (up to 10 s).
std::string companion_job_status(const SessionOptions& o);
// The node a data worker runs on: its id is "NODE:PID" (goldminer-dw's
// default_worker_id).
std::string node_of_worker(const std::string& worker_id);
// The workers to ask to drain: up to `n` of `ready` ((peer, worker id), in
// the session's order), those on `first_node` first ("": none first), as
// when the workers a growth put on the trainer's node did not pay.
std::vector<transport::PeerId> choose_drains(const std::vector<std::pair<transport::PeerId, std::string>>& ready,
                                             size_t n, const std::string& first_node);

class Session::Impl {
 public:
  Impl(SessionOptions options, readers::DatasetPlan plan, LeaseTable table);
  Status start();
  ~Impl();

  std::string address() const { return address_; }
  std::string receive_memory() const { return memory_ != nullptr ? memory_->describe() : "pageable"; }
  const std::vector<std::string>& receive_memory_warnings() const { return memory_warnings_; }
  size_t config_size() const { return config_text_.size(); }
  uint64_t total_records() const { return plan_.total_records; }
  const std::vector<std::string>& files() const { return plan_.config.files; }
  const std::vector<uint64_t>& records_per_file() const { return plan_.records_per_file; }
  // This rank's batches and records in the consumer's current epoch.
  std::pair<uint64_t, uint64_t> share_of_epoch() const;

  Expected<std::optional<SessionBatch>> next(const std::function<bool()>& interrupted);
  LeasePosition state() const;
  SessionMetrics metrics() const;
  size_t drain_workers(size_t n);
  Expected<size_t> wait_for_workers(size_t n, double timeout_s, const std::function<bool()>& interrupted);

 private:
  using Clock = std::chrono::steady_clock;
  using Event = transport::Event;
  using PeerId = transport::PeerId;

  static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

  // An item of the queue: a delivered batch, or the end of an epoch.
  struct Item {
    bool end_of_epoch = false;
    PeerId from = 0;
    uint64_t bad_records = 0;  // skipped while making this batch
    uint64_t bytes = 0;
    bool last_of_split = false;
    SessionBatch batch;
  };

  // kParked: rank 0 of a data-parallel job holds an authenticated worker
  // until every rank has joined, then keeps it (kReady) or sends it to
  // another rank (kRedirected, until it closes). kRank: another rank's
  // session (session_ranks.cc).
  enum class Phase { kHello, kAuth, kReady, kParked, kRedirected, kRank };
  struct Worker {
    Phase phase = Phase::kHello;
    wire::PeerRole role = wire::PeerRole::kWorker;
    auth::Handshake handshake;  // its nonces and the address it dialed (gmcore/peer_auth.h)
    std::string id;
    Clock::time_point connected = Clock::now();
    uint32_t wants = 0;        // lease requests not yet granted
    uint32_t credits = 0;      // batches it may send that have not come yet
    uint32_t queued = 0;       // its batches in the queue
    bool draining = false;
    bool asked_to_drain = false;  // by this session (shrinking), not on its own
  };

  enum class Leave { kLeft, kDropped, kRejected };

  // session.cc
  void consumer_reset_rates();
  double now() const;
  void fail(const std::string& why);
  double queue_fill_locked() const;

  // session_loop.cc
  void run();
  void send(PeerId peer, const wire::Message& m);
  void forget(PeerId peer, const std::string& why, Leave how);
  void drop(PeerId peer, const std::string& why, bool rejected);
  void on_message(PeerId peer, std::shared_ptr<const transport::Frame> frame);
  void on_batch(PeerId peer, const wire::BatchView& b, std::shared_ptr<const transport::Frame> frame);
  void grant_leases();
  // While no worker has joined: logs where the companion job stands every
  // minute, and fails the session after first_worker_timeout_s.
  void check_first_worker();
  // `others`: the workers that may take splits (LeaseTable::grant).
  bool grant_lease(PeerId peer, Worker* w, const std::vector<PeerId>& others = {});
  // A worker gave `split_id` back failed (wire::LeaseReturn::failed):
  // re-leased, or the session fails past split_retries.
  void on_split_failed(PeerId peer, const Worker& w, uint64_t split_id, const std::string& cause);
  void grant_credits();
  // A worker that authenticated: it joins (Program, credits follow).
  void admit(PeerId peer, Worker* w);

  // session_ranks.cc: rank 0 places workers over the ranks; every other
  // rank's link to rank 0 (rank_link).
  void place_worker(PeerId peer, Worker* w);
  void place_parked();
  void on_rank_message(PeerId peer, Worker* w, const wire::Message& m);
  void forget_rank(PeerId peer);
  void rank_link();
  bool ranks_all_joined() const { return ranks_.size() + 1 >= o_.world_size; }

  // session_elastic.cc
  void elastic_loop();

  const SessionOptions o_;
  const auth::PeerAuth peer_auth_{o_.secret, o_.munge};
  readers::DatasetPlan plan_;
  std::unique_ptr<transport::Endpoint> ep_;  // the loop thread's
  std::string address_;                      // set before start() returns
  std::shared_ptr<transport::HostMemory> memory_;  // receive buffers' source; set by start()
  std::vector<std::string> memory_warnings_;
  LeaseTable table_;
  std::string config_text_;
  std::thread loop_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> local_stop_{false};
  std::vector<std::thread> local_;
  Clock::time_point created_ = Clock::now();

  // Loop only.
  std::map<PeerId, Worker> workers_;
  // Rank 0: the other ranks that joined, by rank.
  struct RankPeer {
    PeerId peer = 0;
    std::string address;
    uint32_t workers = 0;       // as it last said (RankStatus)
    uint64_t arrived = 0;       // batches, as it last said
    uint32_t left_unasked = 0;  // workers lost, as it last said
    uint32_t sent = 0;          // workers sent to it in all
  };
  std::map<uint32_t, RankPeer> ranks_;
  // Rank > 0: the link to rank 0 (rank_link), its thread and its state.
  std::thread rank_link_;
  double alone_report_at_s_ = 60;  // next "no data worker has joined" log, seconds after creation
  // Deterministic order: batches held for earlier ones. The loop changes it
  // under mu_ (metrics() reads it).
  ReorderBuffer<Item> reorder_;
  uint64_t batch_bytes_ = 0;  // recent batch frame size (moving average); 0: none yet
  bool epoch_end_queued_ = false;

  // Shared, under mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  uint64_t queue_bytes_ = 0;
  size_t max_queued_ = 0;  // most batches queued and held at once this epoch
  std::vector<PeerId> consumed_from_;  // who sent the batches next() took, for the loop
  Status failure_;
  bool want_next_epoch_ = false;   // the consumer saw the end of an epoch
  bool start_next_epoch_ = false;  // ... and asked for the next
  size_t drain_requests_ = 0;
  // Drains take workers on this node first (their placement did not pay:
  // ElasticStep::drain_trainer_node_first); "" none.
  std::string drain_first_on_;
  uint32_t consumer_epoch_ = 0;
  std::map<uint64_t, uint64_t> consumed_;  // split -> batches returned by next()
  std::set<uint64_t> consumed_done_;
  Clock::time_point epoch_started_;
  uint64_t arrived_batches_ = 0, consumed_batches_ = 0;
  double wait_seconds_ = 0;
  // Since creation, for the elastic loop's windows.
  uint64_t arrived_total_ = 0, consumed_total_ = 0, fill_samples_ = 0;
  double wait_total_ = 0, fill_sum_ = 0;
  int joined_total_ = 0;
  // Rank 0: the other ranks' workers and batches as they last said, for
  // the elastic sizing of the job as a whole.
  uint32_t other_ranks_workers_ = 0;
  uint64_t other_ranks_arrived_ = 0;
  int other_ranks_left_ = 0;  // their workers that left unasked: rank 0 replaces them
  int redirected_total_ = 0;  // workers rank 0 sent to other ranks (joined the job, not this rank)
  int left_unasked_ = 0;  // ready workers that left without a drain asked by us
  bool elastic_stop_ = false;
  std::condition_variable elastic_cv_;
  std::thread elastic_;
  uint64_t workers_lost_ = 0, workers_rejected_ = 0, bad_records_ = 0, duplicates_dropped_ = 0;
  uint64_t splits_failed_ = 0;
  double scaling_window_s_ = 0;  // the last scaling window (elastic_loop): its seconds and batches
  uint64_t scaling_window_batches_ = 0;
  uint64_t consumed_bad_ = 0;  // bad records of the batches next() returned this epoch
  mutable std::mutex deal_mu_;
  mutable LeaseTable deal_table_;  // deals epochs for share_of_epoch(); under deal_mu_
  mutable std::optional<uint32_t> deal_epoch_;

 public:
  uint64_t plan_fingerprint_ = 0;  // set once by create(); see LeasePosition::plan
  std::map<PeerId, WorkerMetrics> per_worker_;
};

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_SESSION_IMPL_H_
