// goldminer::Session (include/goldminer/session.h). One background thread,
// the loop, owns the endpoint, the lease table and the worker records; the
// consumer thread (the training loop) takes batches from a bounded queue.
// They share only the queue, the credit returns and the counters, under mu_.
//
// Worker protocol, trainer side:
//   connected -> Hello -> Challenge(nonce) -> Auth(mac) verified ->
//   Program + Credit(credits_per_worker) -> LeaseRequest* / Batch* /
//   LeaseReturn* / Heartbeat* ... -> disconnected.
// Anything else, or a frame the decoder refuses, drops that connection.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "gmcore/auth.h"
#include "gmcore/log.h"
#include "gmcore/reorder_buffer.h"
#include "gmcore/stream_config.h"
#include "goldminer/session.h"
#include "mpi_transport/transport.h"
#include "dw_daemon/worker.h"
#include "readers/reader.h"

namespace goldminer {
namespace {

using Clock = std::chrono::steady_clock;
using transport::Event;
using transport::PeerId;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// "0.3", "60": a timeout as the caller gave it, for messages.
std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

// Why the job's data workers never came, when spank_goldminer.so could not
// submit their companion job (GOLDMINER_DW_ERROR), as a suffix for the
// messages of waits that timed out; "" otherwise.
std::string companion_job_failure() {
  const char* why = std::getenv("GOLDMINER_DW_ERROR");
  return why != nullptr && *why != '\0' ? std::string("; ") + why : "";
}

// Asks `interrupted` (if any) without holding `lock`: true means stop.
bool ask_interrupted(std::unique_lock<std::mutex>& lock, const std::function<bool()>& interrupted) {
  if (!interrupted) return false;
  lock.unlock();
  const bool stop = interrupted();
  lock.lock();
  return stop;
}

std::string peer_name(PeerId p) { return "connection " + std::to_string(p); }

// An item of the queue: a delivered batch, or the end of an epoch.
struct Item {
  bool end_of_epoch = false;
  PeerId from = 0;
  uint64_t bad_records = 0;  // skipped while making this batch
  uint64_t bytes = 0;
  bool last_of_split = false;
  SessionBatch batch;
};

// What a position's split ids and batch counts mean: the splits (file,
// record range) and how a split becomes batches; the first 8 bytes of
// their SHA-256.
uint64_t plan_fingerprint(const SessionOptions& o, const std::vector<InputSplit>& splits) {
  std::string bytes;
  auto add = [&](uint64_t v) { bytes.append(reinterpret_cast<const char*>(&v), sizeof v); };
  add(o.batch_size);
  add(o.shuffle_buffer);
  add(splits.size());
  for (const InputSplit& s : splits) {
    add(s.id);
    add(s.file.size());
    bytes += s.file;
    add(s.begin);
    add(s.end);
  }
  const auth::Digest d = auth::sha256(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  uint64_t h;
  std::memcpy(&h, d.data(), sizeof h);
  return h == 0 ? 1 : h;  // 0 means "not recorded"
}

}  // namespace

class Session::Impl {
 public:
  Impl(SessionOptions options, readers::DatasetPlan plan, LeaseTable table)
      : o_(std::move(options)), plan_(std::move(plan)), table_(std::move(table)) {
    epoch_started_ = Clock::now();
    consumer_epoch_ = table_.epoch();
    if (o_.resume) {
      for (uint64_t id : o_.resume->done) consumed_done_.insert(id);
      for (auto [id, n] : o_.resume->partial) consumed_[id] = n;
      bad_records_ = consumed_bad_ = o_.resume->bad_records;
    }
    if (o_.deterministic)
      reorder_.start(table_.epoch_order(), consumed_done_, {consumed_.begin(), consumed_.end()});
    StreamConfig stream;
    stream.batch_size = o_.batch_size;
    stream.shuffle_buffer = o_.shuffle_buffer;
    stream.ordered = o_.deterministic;
    stream.dataset = plan_.config.encode();
    config_text_ = stream.encode();
  }

  // Starts the loop thread, which opens the endpoint, uses it and closes
  // it: a UCX worker in UCS_THREAD_MODE_SINGLE, like MPI initialised with
  // MPI_THREAD_FUNNELED, is used by the thread that created it and no
  // other. Then the local workers, if any.
  Status start() {
    // The thread owns the promise: one on this frame could be destroyed
    // while set_value() is still returning on the other thread.
    std::promise<Status> opened;
    auto listening = opened.get_future();
    loop_ = std::thread([this, opened = std::move(opened)]() mutable {
      auto ep = transport::listen(o_.listen);
      if (!ep.ok()) {
        opened.set_value(ep.status());
        return;
      }
      ep_ = std::move(ep).value();
      address_ = ep_->address();
      opened.set_value(Status());
      run();
      ep_.reset();
    });
    Status s = listening.get();
    if (!s.ok()) return s;
    const std::string address = address_;
    for (uint32_t i = 0; i < o_.local_workers; ++i) {
      local_.emplace_back([this, i, address] {
        dw::WorkerOptions w;
        w.trainer = address;
        w.secret = o_.secret;
        w.id = "local-" + std::to_string(i);
        w.threads = o_.local_worker_threads;
        w.load_program = o_.program_loader;
        auto r = dw::run_worker(w, local_stop_);
        if (!r.ok() && !stop_) log::error("goldminer: session: local worker " + w.id + ": " + r.status().message());
      });
    }
    if (o_.elastic.launcher) elastic_ = std::thread([this] { elastic_loop(); });
    return Status();
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      elastic_stop_ = true;
    }
    elastic_cv_.notify_all();
    if (elastic_.joinable()) elastic_.join();
    // The loop tells every worker to drain, then closes the endpoint,
    // which ends them.
    stop_ = true;
    local_stop_ = true;
    if (loop_.joinable()) loop_.join();
    for (auto& t : local_) t.join();
    // Those the launcher started and that never joined: cancelled or told
    // to stop.
    if (o_.elastic.launcher) o_.elastic.launcher->end();
  }

  std::string address() const { return address_; }
  size_t config_size() const { return config_text_.size(); }
  uint64_t total_records() const { return plan_.total_records; }
  const std::vector<std::string>& files() const { return plan_.config.files; }
  const std::vector<uint64_t>& records_per_file() const { return plan_.records_per_file; }
  uint64_t batches_per_epoch() const {
    uint64_t n = 0;
    for (const readers::SplitRange& r : plan_.splits) n += (r.records + o_.batch_size - 1) / o_.batch_size;
    return n;
  }

  Expected<std::optional<SessionBatch>> next(const std::function<bool()>& interrupted) {
    std::unique_lock<std::mutex> lock(mu_);
    if (want_next_epoch_) {
      // The consumer saw the end of the previous epoch: start the next.
      want_next_epoch_ = false;
      start_next_epoch_ = true;
      ++consumer_epoch_;
      consumed_.clear();
      consumed_done_.clear();
      consumer_reset_rates();
    }
    const auto asked = Clock::now();
    for (;;) {
      if (!failure_.ok()) return failure_;
      while (!queue_.empty()) {
        Item item = std::move(queue_.front());
        queue_.pop_front();
        if (item.end_of_epoch) {
          want_next_epoch_ = true;
          return std::optional<SessionBatch>();
        }
        fill_sum_ += queue_fill_locked();  // as the trainer found it
        ++fill_samples_;
        queue_bytes_ -= item.bytes;
        consumed_bad_ += item.bad_records;
        consumed_from_.push_back(item.from);
        ++consumed_batches_;
        ++consumed_total_;
        uint64_t& n = consumed_[item.batch.split_id];
        ++n;
        if (item.last_of_split) {
          consumed_done_.insert(item.batch.split_id);
          consumed_.erase(item.batch.split_id);
        }
        if (item.batch.samples == 0) continue;  // a split whose records were all skipped
        return std::optional<SessionBatch>(std::move(item.batch));
      }
      if (o_.timeout_s > 0 && seconds_since(asked) >= o_.timeout_s) {
        return Status::error("no batch within " + seconds_text(o_.timeout_s) + " s (" +
                             std::to_string(per_worker_.size()) + " workers connected, " +
                             std::to_string(workers_lost_) + " lost with splits in hand)" +
                             companion_job_failure());
      }
      const auto t0 = Clock::now();
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      const double waited = seconds_since(t0);
      wait_seconds_ += waited;
      wait_total_ += waited;
      if (ask_interrupted(lock, interrupted)) return Status::error(Session::kInterrupted);
    }
  }

  LeasePosition state() const {
    std::lock_guard<std::mutex> lock(mu_);
    LeasePosition p;
    p.epoch = consumer_epoch_ + (want_next_epoch_ ? 1 : 0);
    p.seed = o_.seed;
    p.plan = plan_fingerprint_;
    if (!want_next_epoch_) {
      p.done.assign(consumed_done_.begin(), consumed_done_.end());
      for (auto [id, n] : consumed_) p.partial.emplace_back(id, n);
      p.bad_records = consumed_bad_;
    }
    return p;
  }

  SessionMetrics metrics() const {
    std::lock_guard<std::mutex> lock(mu_);
    SessionMetrics m;
    m.epoch = consumer_epoch_;
    m.queue_batches = queue_.size();
    m.held_batches = reorder_.held();
    m.queue_bytes = queue_bytes_;
    m.queue_fill = queue_fill_locked();
    const double wall = std::max(1e-9, seconds_since(epoch_started_));
    m.arrival_rate = static_cast<double>(arrived_batches_) / wall;
    m.consumption_rate = static_cast<double>(consumed_batches_) / wall;
    m.trainer_wait_fraction = std::min(1.0, wait_seconds_ / wall);
    m.workers = per_worker_.size();
    m.workers_lost = workers_lost_;
    m.workers_rejected = workers_rejected_;
    m.bad_records = bad_records_;
    m.duplicates_dropped = duplicates_dropped_;
    for (const auto& [peer, w] : per_worker_) m.per_worker.push_back(w);
    return m;
  }

  size_t drain_workers(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    drain_requests_ += n;
    return std::min(n, per_worker_.size());
  }

  Expected<size_t> wait_for_workers(size_t n, double timeout_s, const std::function<bool()>& interrupted) {
    const auto asked = Clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (per_worker_.size() >= n) return per_worker_.size();
      if (!failure_.ok()) return failure_;
      if (seconds_since(asked) >= timeout_s)
        return Status::error("only " + std::to_string(per_worker_.size()) + " of " + std::to_string(n) +
                             " workers joined within " + seconds_text(timeout_s) + " s" +
                             companion_job_failure());
      const auto t0 = Clock::now();
      cv_.wait_for(lock, std::chrono::milliseconds(20));
      wait_total_ += seconds_since(t0);  // the trainer waits for workers: elastic growth sees it
      if (ask_interrupted(lock, interrupted)) return Status::error(Session::kInterrupted);
    }
  }

 private:
  enum class Phase { kHello, kAuth, kReady };
  struct Worker {
    Phase phase = Phase::kHello;
    auth::Digest nonce{};
    std::string id;
    Clock::time_point connected = Clock::now();
    uint32_t wants = 0;        // lease requests not yet granted
    uint32_t credits = 0;      // batches it may send that have not come yet
    uint32_t queued = 0;       // its batches in the queue
    bool draining = false;
  };

  // Every interval: the queue's metrics over the interval to the
  // controller, and what it says done (sched/elastic.h).
  void elastic_loop() {
    const ElasticSetup& e = o_.elastic;
    ElasticController controller(e.config, e.launcher.get(), now());
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t arrived = arrived_total_, consumed = consumed_total_, fills = fill_samples_;
    double waited = wait_total_, since = now(), capacity = 0, fill_sum = fill_sum_;
    const auto interval = std::chrono::duration<double>(e.interval_s);
    for (;;) {
      const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(interval);
      elastic_cv_.wait_until(lock, until, [this] { return elastic_stop_; });
      if (elastic_stop_) return;
      const double t = now(), window = std::max(1e-9, t - since);
      QueueMetrics m;
      m.workers = static_cast<int>(per_worker_.size());
      m.arrival_rate = static_cast<double>(arrived_total_ - arrived) / window;
      m.consumption_rate = static_cast<double>(consumed_total_ - consumed) / window;
      m.trainer_wait_fraction = std::min(1.0, (wait_total_ - waited) / window);
      // The fill as the trainer found it when it took batches in the
      // window; now, when it took none.
      m.queue_fill = fill_samples_ > fills ? (fill_sum_ - fill_sum) / static_cast<double>(fill_samples_ - fills)
                                           : queue_fill_locked();
      // What one worker can make: the most measured while the queue had
      // room (a full queue holds workers back by credits, and their rate
      // is then the trainer's; at an epoch's end they idle), used while it
      // stays full.
      const double observed = m.workers > 0 ? m.arrival_rate / m.workers : 0;
      if (m.queue_fill < 0.5) capacity = std::max(capacity, observed);
      m.per_worker_rate = m.queue_fill < 0.5 || capacity == 0 ? observed : capacity;
      arrived = arrived_total_, consumed = consumed_total_, waited = wait_total_, since = t;
      fills = fill_samples_, fill_sum = fill_sum_;
      lock.unlock();  // the launcher runs Slurm's commands
      const ElasticStep step = controller.observe(m, t);
      char why[160];
      std::snprintf(why, sizeof why, "%d workers, trainer waited %.0f %% of the last %.1f s, queue %.0f %% full",
                    m.workers, 100 * m.trainer_wait_fraction, window, 100 * m.queue_fill);
      if (step.started > 0) log::info("goldminer: session: " + std::string(why) + ": started " +
                                      std::to_string(step.started) + " more data workers");
      if (!step.error.empty()) log::error("goldminer: session: cannot start more data workers: " + step.error);
      if (step.cancelled > 0) log::info("goldminer: session: " + std::string(why) + ": cancelled " +
                                        std::to_string(step.cancelled) + " data workers still waiting to start");
      if (step.drain > 0) {
        log::info("goldminer: session: " + std::string(why) + ": draining " + std::to_string(step.drain) +
                  " data workers");
        drain_workers(static_cast<size_t>(step.drain));
      }
      lock.lock();
    }
  }

  void consumer_reset_rates() {
    epoch_started_ = Clock::now();
    arrived_batches_ = 0;
    consumed_batches_ = 0;
    wait_seconds_ = 0;
    bad_records_ = 0;
    consumed_bad_ = 0;
  }

  double now() const { return seconds_since(created_); }

  void fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.ok()) failure_ = Status::error(why);
    cv_.notify_all();
  }

  void send(PeerId peer, const wire::Message& m) {
    std::vector<uint8_t> frame = wire::encode(m);
    Status s = ep_->send(peer, frame.data(), frame.size());
    if (!s.ok()) log::verbose("goldminer: session: " + peer_name(peer) + ": " + s.message());
  }

  enum class Leave { kLeft, kDropped, kRejected };

  // Forgets a connection (closing it unless the peer left); its splits go
  // back to pending.
  void forget(PeerId peer, const std::string& why, Leave how) {
    auto it = workers_.find(peer);
    if (it == workers_.end()) return;
    const bool was_ready = it->second.phase == Phase::kReady;
    const std::string who = it->second.id.empty() ? peer_name(peer) : "worker " + it->second.id;
    std::vector<uint64_t> lost = table_.drop_worker(peer);
    workers_.erase(it);
    if (how != Leave::kLeft) ep_->disconnect(peer);
    {
      std::lock_guard<std::mutex> lock(mu_);
      per_worker_.erase(peer);
      if (how == Leave::kRejected) ++workers_rejected_;
      if (was_ready && !lost.empty()) ++workers_lost_;
    }
    (how == Leave::kRejected ? log::error : log::info)(
        "goldminer: session: " + who + (how == Leave::kLeft ? " left: " : " dropped: ") + why +
        (lost.empty() ? "" : " (" + std::to_string(lost.size()) + " splits re-leased)"));
  }

  void drop(PeerId peer, const std::string& why, bool rejected) {
    forget(peer, why, rejected ? Leave::kRejected : Leave::kDropped);
  }

  void on_message(PeerId peer, std::shared_ptr<const transport::Frame> frame) {
    auto it = workers_.find(peer);
    if (it == workers_.end()) return;
    Worker& w = it->second;
    auto decoded = wire::decode_frame(frame->data(), frame->size(), frame->size());
    if (!decoded.ok()) return drop(peer, decoded.status().message(), true);
    wire::Message& m = *decoded;
    switch (w.phase) {
      case Phase::kHello: {
        auto* hello = std::get_if<wire::Hello>(&m);
        if (hello == nullptr) return drop(peer, "expected hello", true);
        w.id = hello->worker_id;
        auto nonce = auth::random_nonce();
        if (!nonce.ok()) return drop(peer, nonce.status().message(), false);
        w.nonce = *nonce;
        w.phase = Phase::kAuth;
        wire::Challenge c;
        c.nonce = w.nonce;
        send(peer, c);
        return;
      }
      case Phase::kAuth: {
        auto* a = std::get_if<wire::Auth>(&m);
        if (a == nullptr) return drop(peer, "expected auth", true);
        if (!auth::verify(o_.secret, w.nonce, a->mac)) {
          send(peer, wire::Error{1, "authentication failed: the worker does not hold this job's secret"});
          return drop(peer, "authentication failed (wrong or missing job secret)", true);
        }
        w.phase = Phase::kReady;
        {
          std::lock_guard<std::mutex> lock(mu_);
          per_worker_[peer].id = w.id;
        }
        send(peer, wire::Program{config_text_, o_.program});  // credits follow (grant_credits)
        log::info("goldminer: session: worker " + w.id + " joined");
        return;
      }
      case Phase::kReady:
        break;
    }
    if (auto* req = std::get_if<wire::LeaseRequest>(&m)) {
      w.wants += req->splits;
      table_.heartbeat(peer, now());
    } else if (auto* b = std::get_if<wire::BatchView>(&m)) {
      on_batch(peer, *b, std::move(frame));
    } else if (auto* r = std::get_if<wire::LeaseReturn>(&m)) {
      // Workers give splits back only when they drain (SIGTERM, or a Drain
      // from here): lease it nothing more, not even the awaited split.
      w.draining = true;
      Status s = table_.give_back(peer, r->split_id);
      if (!s.ok()) log::verbose("goldminer: session: " + s.message());
    } else if (std::get_if<wire::Heartbeat>(&m)) {
      table_.heartbeat(peer, now());
    } else if (auto* e = std::get_if<wire::Error>(&m)) {
      // A worker that cannot go on (corrupt input, failing program): the
      // same input would fail on any worker, so the session fails.
      fail("worker " + w.id + ": " + e->message);
      drop(peer, "reported an error", false);
    } else {
      drop(peer, std::string("unexpected ") + wire::type_name(static_cast<wire::MessageType>(m.index() + 1)), true);
    }
  }

  void on_batch(PeerId peer, const wire::BatchView& b, std::shared_ptr<const transport::Frame> frame) {
    if (auto w = workers_.find(peer); w != workers_.end() && w->second.credits > 0) --w->second.credits;
    // The last tensor is the sample identity [samples, 2] (int64). Checked
    // before the lease table counts the batch as delivered: a refused
    // batch is then re-run with its split, not skipped.
    if (b.tensors.empty() || b.tensors.back().dtype != wire::DType::kInt64 ||
        b.tensors.back().shape != std::vector<int64_t>{b.samples, 2})
      return drop(peer, "batch without its sample-id tensor", true);
    auto verdict = table_.accept_batch(peer, b.split_id, b.sequence, now());
    if (!verdict.ok()) return drop(peer, verdict.status().message(), true);
    if (*verdict != BatchVerdict::kDeliver) {
      // Not queued: grant_credits gives its credit back.
      std::lock_guard<std::mutex> lock(mu_);
      if (*verdict == BatchVerdict::kDuplicate) ++duplicates_dropped_;
      return;
    }
    if (b.last_of_split) {
      Status s = table_.complete(peer, b.split_id, uint64_t{b.sequence} + 1);
      if (!s.ok()) return drop(peer, s.message(), true);
    }
    Item item;
    item.from = peer;
    item.bad_records = b.bad_records;
    item.bytes = frame->size();
    batch_bytes_ = batch_bytes_ == 0 ? item.bytes : (7 * batch_bytes_ + item.bytes) / 8;
    item.last_of_split = b.last_of_split;
    item.batch.epoch = table_.epoch();
    item.batch.split_id = b.split_id;
    item.batch.sequence = b.sequence;
    item.batch.samples = b.samples;
    item.batch.tensors.assign(b.tensors.begin(), b.tensors.end() - 1);
    item.batch.sample_ids = reinterpret_cast<const int64_t*>(b.tensors.back().data);
    item.batch.keepalive = std::move(frame);
    std::lock_guard<std::mutex> lock(mu_);
    bad_records_ += b.bad_records;
    if (bad_records_ > o_.max_bad_records && failure_.ok())
      failure_ = Status::error("input: " + std::to_string(bad_records_) + " corrupt records this epoch exceed " +
                               "the budget of " + std::to_string(o_.max_bad_records) + " (--max-bad-records)");
    auto& pw = per_worker_[peer];
    ++pw.batches;
    pw.bytes += item.bytes;
    const auto jt = workers_.find(peer);
    if (jt != workers_.end()) {
      pw.batches_per_s = pw.batches / std::max(1e-9, seconds_since(jt->second.connected));
      ++jt->second.queued;
    }
    queue_bytes_ += item.bytes;
    ++arrived_batches_;
    ++arrived_total_;
    if (!o_.deterministic) {
      queue_.push_back(std::move(item));
    } else {
      // Held until the batches before it in the epoch's order are queued;
      // it counts against its worker's share of the queue meanwhile.
      auto ready = reorder_.add(b.split_id, b.sequence, b.last_of_split, std::move(item));
      if (!ready.ok()) {
        if (failure_.ok()) failure_ = Status::error("session: " + ready.status().message());
      } else {
        for (Item& r : *ready) queue_.push_back(std::move(r));
      }
    }
    cv_.notify_all();
  }

  void grant_leases() {
    for (auto& [peer, w] : workers_)
      while (w.phase == Phase::kReady && !w.draining && w.wants > 0 && grant_lease(peer, &w)) {
      }
    // Deterministic order: the split every later batch waits for is leased
    // even when no worker asks for more (all may be held back, their room
    // full of batches that wait for it). It is the first pending split
    // (LeaseConfig::deterministic_order), so grant() gives it. A worker
    // takes an unasked-for lease like any other.
    const std::optional<uint64_t> head = o_.deterministic ? reorder_.head() : std::nullopt;
    if (head && table_.is_pending(*head))
      for (auto& [peer, w] : workers_)
        if (w.phase == Phase::kReady && !w.draining && grant_lease(peer, &w)) break;
  }

  // Leases the first pending split to `peer`; false if none is pending.
  bool grant_lease(PeerId peer, Worker* w) {
    auto lease = table_.grant(peer, now());
    if (!lease) return false;
    if (w->wants > 0) --w->wants;
    wire::LeaseGrant g;
    g.split_id = lease->split.id;
    g.epoch = lease->epoch;
    g.seed = lease->split_seed;
    g.skip_batches = lease->skip_batches;
    g.file = lease->split.file;
    g.file_index = lease->split.file_index;
    g.begin = lease->split.begin;
    g.end = lease->split.end;
    g.offset = lease->split.offset;
    g.rank = lease->rank;
    send(peer, g);
    return true;
  }

  // Keeps the queue bounded: the batches of all workers in the queue or
  // still to come on their credits stay within queue_batches and, at the
  // recent batch size, queue_bytes, except that every worker may always
  // have one (so the bound is max(that, workers) batches). Each worker gets
  // an equal share, at most credits_per_worker (deterministic order: the
  // whole share, and see the end); until the first batch tells
  // its size, one each. A worker's consumed batches give it room again;
  // when workers join, the others' share shrinks as their batches are
  // consumed.
  void grant_credits() {
    uint64_t ready = 0, total = 0;
    for (const auto& [peer, w] : workers_)
      if (w.phase == Phase::kReady) {
        ++ready;
        total += uint64_t{w.credits} + w.queued;
      }
    if (ready == 0) return;
    uint64_t limit = batch_bytes_ > 0 ? std::min<uint64_t>(o_.queue_batches, o_.queue_bytes / batch_bytes_) : ready;
    limit = std::max(limit, ready);
    // Deterministic order: a worker's batches of later splits wait in the
    // session for the awaited one, so the whole equal share is its room to
    // run ahead (with credits_per_worker's 4 three workers on text lines
    // made 0.55-0.68 M samples/s; with the share, 1.8-2.2 M).
    const uint64_t cap = o_.deterministic ? limit : std::max<uint32_t>(1, o_.credits_per_worker);
    const uint64_t share = std::clamp<uint64_t>(limit / ready, 1, cap);
    for (auto& [peer, w] : workers_) {
      const uint64_t out = uint64_t{w.credits} + w.queued;
      if (w.phase != Phase::kReady || out >= share) continue;
      uint64_t allowed = total < limit ? limit - total : 0;
      if (out == 0) allowed = std::max<uint64_t>(allowed, 1);
      const auto n = static_cast<uint32_t>(std::min(share - out, allowed));
      if (n == 0) continue;
      total += n;
      w.credits += n;
      send(peer, wire::Credit{n});
    }
    // Deterministic order: when the trainer has nothing left to take, the
    // worker holding the split that every later batch waits for may send
    // one more, beyond its share. Its room may be full of batches of its
    // other splits, held for that split's, and nothing the trainer takes
    // would free it; each such credit moves it on (its producers finish
    // those splits and reach this one). So what the session holds can
    // exceed its bound by what that worker's other splits still send.
    if (!o_.deterministic) return;
    const std::optional<uint64_t> head = reorder_.head();
    const std::optional<uint64_t> holder = head ? table_.holder(*head) : std::nullopt;
    if (!holder) return;
    auto it = workers_.find(*holder);
    if (it == workers_.end() || it->second.phase != Phase::kReady || it->second.credits > 0) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!queue_.empty()) return;
    }
    it->second.credits = 1;
    send(*holder, wire::Credit{1});
  }

  // How full the queue is, 0..1: of the room workers may use (queue_batches,
  // or, not deterministic, credits_per_worker per connected worker where
  // that is less), and of queue_bytes; deterministic order counts held
  // batches too. 1: workers wait for the trainer. mu_ held.
  double queue_fill_locked() const {
    const uint64_t per_worker = o_.deterministic ? o_.queue_batches : o_.credits_per_worker;
    const uint64_t room = std::max<uint64_t>(
        1, std::min<uint64_t>(o_.queue_batches, std::max<size_t>(1, per_worker_.size()) * per_worker));
    // Held batches count: workers that are ahead of the awaited split are
    // not what the trainer waits for.
    return std::min(1.0, std::max(static_cast<double>(queue_.size() + reorder_.held()) / room,
                                  static_cast<double>(queue_bytes_) / std::max<uint64_t>(1, o_.queue_bytes)));
  }

  void run() {
    created_ = Clock::now();
    auto last_check = Clock::now();
    while (!stop_) {
      auto e = ep_->poll(2);
      if (!e.ok()) {
        fail("session: transport: " + e.status().message());
        break;
      }
      if (e->has_value()) {
        Event& ev = **e;
        switch (ev.kind) {
          case Event::Kind::kConnected:
            workers_[ev.peer] = Worker{};
            break;
          case Event::Kind::kMessage:
            on_message(ev.peer, std::move(ev.frame));
            break;
          case Event::Kind::kDisconnected:
            forget(ev.peer, ev.reason, Leave::kLeft);
            break;
        }
      }
      // Credits for the room the queue has; epoch changes; drain requests.
      bool start_epoch = false;
      size_t drains = 0;
      std::vector<PeerId> consumed;
      {
        std::lock_guard<std::mutex> lock(mu_);
        consumed.swap(consumed_from_);
        start_epoch = start_next_epoch_;
        start_next_epoch_ = false;
        drains = drain_requests_;
        drain_requests_ = 0;
      }
      for (PeerId p : consumed)
        if (auto w = workers_.find(p); w != workers_.end() && w->second.queued > 0) --w->second.queued;
      grant_credits();
      for (auto& [peer, w] : workers_) {
        if (drains == 0) break;
        if (w.phase == Phase::kReady && !w.draining) {
          w.draining = true;
          send(peer, wire::Drain{});
          --drains;
        }
      }
      if (start_epoch) {
        table_.start_epoch(table_.epoch() + 1);
        if (o_.deterministic) {
          std::lock_guard<std::mutex> lock(mu_);  // metrics() reads it
          reorder_.start(table_.epoch_order());
        }
        epoch_end_queued_ = false;
      }
      if (table_.epoch_done() && !epoch_end_queued_) {
        epoch_end_queued_ = true;
        if (o_.deterministic && reorder_.head())  // every split's last batch came: nothing can be held
          fail("session: internal error: split " + std::to_string(*reorder_.head()) +
               " still held back at the end of the epoch");
        std::lock_guard<std::mutex> lock(mu_);
        Item end;
        end.end_of_epoch = true;
        queue_.push_back(std::move(end));
        cv_.notify_all();
      }
      grant_leases();
      if (seconds_since(last_check) > 0.25) {
        last_check = Clock::now();
        for (uint64_t peer : table_.expire(now())) drop(peer, "no heartbeat within the lease timeout", false);
        std::vector<PeerId> slow;
        for (auto& [peer, w] : workers_)
          if (w.phase != Phase::kReady && seconds_since(w.connected) > o_.handshake_timeout_s) slow.push_back(peer);
        for (PeerId p : slow) drop(p, "did not authenticate in time", true);
      }
    }
    // Tell connected workers to leave.
    for (auto& [peer, w] : workers_)
      if (w.phase == Phase::kReady) send(peer, wire::Drain{});
  }

  const SessionOptions o_;
  readers::DatasetPlan plan_;
  std::unique_ptr<transport::Endpoint> ep_;  // the loop thread's
  std::string address_;                      // set before start() returns
  LeaseTable table_;
  std::string config_text_;
  std::thread loop_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> local_stop_{false};
  std::vector<std::thread> local_;
  Clock::time_point created_ = Clock::now();

  // Loop only.
  std::map<PeerId, Worker> workers_;
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
  std::vector<PeerId> consumed_from_;  // who sent the batches next() took, for the loop
  Status failure_;
  bool want_next_epoch_ = false;   // the consumer saw the end of an epoch
  bool start_next_epoch_ = false;  // ... and asked for the next
  size_t drain_requests_ = 0;
  uint32_t consumer_epoch_ = 0;
  std::map<uint64_t, uint64_t> consumed_;  // split -> batches returned by next()
  std::set<uint64_t> consumed_done_;
  Clock::time_point epoch_started_;
  uint64_t arrived_batches_ = 0, consumed_batches_ = 0;
  double wait_seconds_ = 0;
  // Since creation, for the elastic loop's windows.
  uint64_t arrived_total_ = 0, consumed_total_ = 0, fill_samples_ = 0;
  double wait_total_ = 0, fill_sum_ = 0;
  bool elastic_stop_ = false;
  std::condition_variable elastic_cv_;
  std::thread elastic_;
  uint64_t workers_lost_ = 0, workers_rejected_ = 0, bad_records_ = 0, duplicates_dropped_ = 0;
  uint64_t consumed_bad_ = 0;  // bad records of the batches next() returned this epoch

 public:
  uint64_t plan_fingerprint_ = 0;  // set once by create(); see LeasePosition::plan
  std::map<PeerId, WorkerMetrics> per_worker_;
};

Expected<std::unique_ptr<Session>> Session::create(SessionOptions o) {
  if (o.secret.empty()) return Status::error("session: no job secret (set GOLDMINER_SECRET or a secret file)");
  if (o.batch_size == 0) return Status::error("session: batch size must be at least 1");
  auto spec = readers::parse_input_spec(o.input);
  if (!spec.ok()) return spec.status();
  readers::ReaderOptions ro;
  // Each split may skip up to the whole budget; the session enforces it
  // over the epoch.
  ro.max_bad_records = o.max_bad_records;
  const uint64_t per_split = o.records_per_split ? o.records_per_split : uint64_t{16} * o.batch_size;
  auto plan = readers::plan_dataset(*spec, ro, per_split);
  if (!plan.ok()) return plan.status();
  if (plan->total_records == 0) return Status::error("session: input '" + o.input + "' holds no records");
  std::vector<InputSplit> splits;
  for (size_t i = 0; i < plan->splits.size(); ++i) {
    const auto& r = plan->splits[i];
    InputSplit s;
    s.id = i;
    s.file = plan->config.files[r.file_index];
    s.file_index = r.file_index;
    s.begin = r.first_record;
    s.end = r.first_record + r.records;
    s.offset = r.byte_offset;
    splits.push_back(std::move(s));
  }
  const uint64_t fingerprint = plan_fingerprint(o, splits);
  LeaseConfig lc;
  lc.seed = o.seed;
  lc.lease_timeout_s = o.lease_timeout_s;
  lc.deterministic_order = o.deterministic;
  auto table = LeaseTable::create(std::move(splits), lc);
  if (!table.ok()) return table.status();
  if (o.resume) {
    if (o.resume->seed != o.seed)
      return Status::error("session: resume position was taken with seed " + std::to_string(o.resume->seed) +
                           ", this session has seed " + std::to_string(o.seed));
    if (o.resume->plan != 0 && o.resume->plan != fingerprint)
      return Status::error("session: resume position was taken on another input plan (files, record ranges per "
                           "split, batch size or shuffle buffer differ): resuming would deliver other samples");
    Status s = table->resume(*o.resume);
    if (!s.ok()) return s;
  }
  const std::string input = o.input;
  auto impl = std::make_unique<Impl>(std::move(o), std::move(plan).value(), std::move(table).value());
  // Workers get the reader configuration, file list included, in one
  // message field: say so here rather than have every worker refuse it.
  if (impl->config_size() > wire::kMaxString)
    return Status::error("session: input '" + input.substr(0, 200) +
                         "': its reader configuration (a JPEG listing is part of it) is " +
                         std::to_string(impl->config_size()) + " bytes, more than the " +
                         std::to_string(wire::kMaxString) +
                         " a worker can be sent (about 20,000 JPEG files; readers/README.md)");
  impl->plan_fingerprint_ = fingerprint;
  Status started = impl->start();
  if (!started.ok()) return started;
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Status SessionOptions::from_environment() {
  if (const char* v = std::getenv("GOLDMINER_LISTEN"); v != nullptr && *v != '\0') listen = v;
  const char* env_secret = std::getenv("GOLDMINER_SECRET");
  const char* file = std::getenv("GOLDMINER_SECRET_FILE");
  if (env_secret != nullptr || (file != nullptr && *file != '\0')) {
    auto s = auth::load_secret(env_secret, file != nullptr ? file : "");
    if (!s.ok()) return s.status();
    secret = *s;
  }
  if (const char* v = std::getenv("GOLDMINER_LOCAL_WORKERS"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 10);
    if (*end != '\0' || n > 1024)
      return Status::error("GOLDMINER_LOCAL_WORKERS: invalid value '" + std::string(v) + "': expected 0..1024");
    local_workers = static_cast<uint32_t>(n);
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  auto e = elastic_from_environment(env);
  if (!e.ok()) return e.status();
  if (e->launcher) elastic = std::move(e).value();
  return Status();
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;
std::string Session::address() const { return impl_->address(); }
uint64_t Session::total_records() const { return impl_->total_records(); }
const std::vector<std::string>& Session::files() const { return impl_->files(); }
const std::vector<uint64_t>& Session::records_per_file() const { return impl_->records_per_file(); }
uint64_t Session::batches_per_epoch() const { return impl_->batches_per_epoch(); }
const char* const Session::kInterrupted = "interrupted while waiting for a batch";

Expected<std::optional<SessionBatch>> Session::next() { return impl_->next({}); }
Expected<std::optional<SessionBatch>> Session::next(const std::function<bool()>& interrupted) {
  return impl_->next(interrupted);
}

void Session::EpochRange::iterator::advance() {
  current_.reset();
  if (session_ == nullptr) return;
  auto b = session_->next();
  if (!b.ok()) {
    session_->last_error_ = b.status();
    return;
  }
  session_->last_error_ = Status();
  if (b->has_value()) current_ = std::move(**b);
}
LeasePosition Session::state() const { return impl_->state(); }
SessionMetrics Session::metrics() const { return impl_->metrics(); }
size_t Session::drain_workers(size_t n) { return impl_->drain_workers(n); }
Expected<size_t> Session::wait_for_workers(size_t n, double timeout_s, const std::function<bool()>& interrupted) {
  return impl_->wait_for_workers(n, timeout_s, interrupted);
}

}  // namespace goldminer
