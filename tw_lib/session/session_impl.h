// Session::Impl (include/goldminer/session.h): the trainer session, made of
// the objects its threads own or share. Internal to libgoldminer_session.
//
// Threads, and what each owns:
// - the loop thread (session_loop.cc, session_leases.cc,
//   session_ranks.cc) owns the endpoint, the lease table, the record of
//   every connection and its credits (WorkerTable, worker_table.h) and, on
//   rank 0 of data-parallel ranks, the other ranks (RankTable,
//   rank_table.h);
// - the consumer (the training loop: next(), state(), metrics(), in
//   session.cc) takes batches from the bounded queue;
// - the elastic thread (session_elastic.cc) sizes the workers from the
//   counters;
// - on another rank of data-parallel ranks, the rank link's thread
//   (RankLink, rank_link.h) tells rank 0 how many workers this rank has;
// - local workers (SessionOptions::local_workers) run as threads of their
//   own, connected like any worker.
// They share, under mu_, the queue with the consumer's epoch and position
// (ConsumerQueue, consumer_queue.h), the counters (SessionCounters,
// session_counters.h), the failure, and the requests to the loop
// (drains; the next epoch is the queue's).
#ifndef GOLDMINER_TW_LIB_SESSION_IMPL_H_
#define GOLDMINER_TW_LIB_SESSION_IMPL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gmcore/auth.h"
#include "goldminer/session.h"
#include "mpi_transport/transport.h"
#include "readers/reader.h"
#include "sched/elastic.h"
#include "tw_lib/session/consumer_queue.h"
#include "tw_lib/session/rank_link.h"
#include "tw_lib/session/rank_table.h"
#include "tw_lib/session/session_counters.h"
#include "tw_lib/session/worker_table.h"

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

  uint64_t plan_fingerprint_ = 0;  // set once by create(); see LeasePosition::plan

 private:
  using Clock = std::chrono::steady_clock;
  using Event = transport::Event;
  using PeerId = transport::PeerId;
  using Phase = WorkerPhase;
  using Worker = WorkerRecord;

  static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

  enum class Leave { kLeft, kDropped, kRejected };

  // session.cc
  double now() const;
  void fail(const std::string& why);

  // session_loop.cc: the loop thread.
  void run();
  // Credits for the room the queue has; the consumer's epoch changes and
  // drain requests; the epoch's end into the queue.
  void serve_requests();
  void drain(size_t n, const std::string& first_on);
  void send(PeerId peer, const wire::Message& m);
  void forget(PeerId peer, const std::string& why, Leave how);
  void drop(PeerId peer, const std::string& why, bool rejected);
  void on_message(PeerId peer, std::shared_ptr<const transport::Frame> frame);
  // A ready worker's message.
  void on_worker_message(PeerId peer, Worker* w, wire::Message& m, std::shared_ptr<const transport::Frame> frame);
  void on_batch(PeerId peer, const wire::BatchView& b, std::shared_ptr<const transport::Frame> frame);
  // While no worker has joined: logs where the companion job stands every
  // minute, and fails the session after first_worker_timeout_s.
  void check_first_worker();
  // A worker that authenticated: it joins (Program, credits follow).
  void admit(PeerId peer, Worker* w);

  // session_leases.cc: leases and credits (the loop thread).
  void grant_leases();
  // `others`: the workers that may take splits (LeaseTable::grant).
  bool grant_lease(PeerId peer, Worker* w, const std::vector<PeerId>& others = {});
  // A worker gave `split_id` back failed (wire::LeaseReturn::failed):
  // re-leased, or the session fails past split_retries.
  void on_split_failed(PeerId peer, const Worker& w, uint64_t split_id, const std::string& cause);
  void grant_credits();

  // session_ranks.cc: rank 0 places workers over the ranks (the loop
  // thread).
  bool shares_workers_with_ranks() const { return o_.world_size > 1 && o_.rank == 0 && !o_.rank0.empty(); }
  void place_worker(PeerId peer, Worker* w);
  void place_parked();
  void on_rank_message(PeerId peer, Worker* w, const wire::Message& m);
  void forget_rank(PeerId peer);

  // session_elastic.cc: the elastic thread.
  void elastic_loop();

  const SessionOptions o_;
  const auth::PeerAuth peer_auth_{o_.secret, o_.munge};
  readers::DatasetPlan plan_;
  std::string address_;                      // set before start() returns
  std::shared_ptr<transport::HostMemory> memory_;  // receive buffers' source; set by start()
  std::vector<std::string> memory_warnings_;
  std::string config_text_;
  std::thread loop_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> local_stop_{false};
  std::vector<std::thread> local_;
  Clock::time_point created_ = Clock::now();

  // The loop thread's alone.
  std::unique_ptr<transport::Endpoint> ep_;
  LeaseTable table_;
  WorkerTable workers_;
  RankTable ranks_;  // rank 0 of data-parallel ranks: the others
  double alone_report_at_s_ = 60;  // next "no data worker has joined" log, seconds after creation
  bool epoch_end_queued_ = false;

  // Rank > 0 of data-parallel ranks: the link to rank 0, on its own thread.
  std::unique_ptr<RankLink> rank_link_;

  // Shared by the loop, the consumer and the elastic thread, under mu_:
  // one lock, as the loop changes the queue and the counters of a batch
  // together and metrics() and the elastic thread read them as one
  // snapshot. cv_ wakes the consumer (a batch, a failure); elastic_cv_ the
  // elastic thread (a worker lost, stopping).
  mutable std::mutex mu_;
  std::condition_variable cv_;
  ConsumerQueue queue_;
  SessionCounters counters_;
  Status failure_;
  // Drains asked for (drain_workers, the elastic thread), for the loop.
  size_t drain_requests_ = 0;
  // Drains take workers on this node first (their placement did not pay:
  // ElasticStep::drain_trainer_node_first); "" none.
  std::string drain_first_on_;
  bool elastic_stop_ = false;
  std::condition_variable elastic_cv_;
  std::thread elastic_;

  // share_of_epoch()'s own copy of the lease table, which deals epochs
  // apart from the loop thread's; under deal_mu_.
  mutable std::mutex deal_mu_;
  mutable LeaseTable deal_table_;
  mutable std::optional<uint32_t> deal_epoch_;
};

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_SESSION_IMPL_H_
