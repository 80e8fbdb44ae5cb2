// goldminer::Session (include/goldminer/session.h): its creation and the
// training loop's calls (next(), state(), metrics(), ...). The options from
// the environment are in session_environment.cc, the loop thread's side in
// session_loop.cc, the elastic thread in session_elastic.cc; what they
// share in session_impl.h.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>

#include "gmcore/auth.h"
#include "gmcore/host_port.h"
#include "gmcore/log.h"
#include "gmcore/stream_config.h"
#include "launch/slurm_cli.h"
#include "dw_daemon/worker.h"
#include "tw_lib/session/receive_memory.h"
#include "tw_lib/session/session_impl.h"
#include "tw_lib/session/session_listen.h"

namespace goldminer {

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

std::string companion_job_failure(const SessionOptions& o) {
  return o.companion_job_error.empty() ? "" : "; " + o.companion_job_error;
}

std::string companion_job_status(const SessionOptions& o) {
  if (o.companion_job == 0) return "";
  const std::string name = "; companion job " + std::to_string(o.companion_job);
  auto status = job_status(user_slurm_command(10), o.companion_job);
  if (!status.ok()) return name + ": " + status.status().message();
  if (!status->listed) return name + " has ended (squeue no longer lists it)";
  // "PENDING (Resources)"; "RUNNING".
  if (status->reason.empty()) return name + " is " + status->state_name;
  return name + " is " + status->state_name + " (" + status->reason + ")";
}

namespace {

// Asks `interrupted` (if any) without holding `lock`: true means stop.
bool ask_interrupted(std::unique_lock<std::mutex>& lock, const std::function<bool()>& interrupted) {
  if (!interrupted) return false;
  lock.unlock();
  const bool stop = interrupted();
  lock.lock();
  return stop;
}

// What a position's split ids and batch counts mean: the splits (file,
// record range) and how a split becomes batches; the first 8 bytes of
// their SHA-256.
uint64_t plan_fingerprint(const SessionOptions& o, const std::vector<InputSplit>& splits) {
  std::string bytes;
  auto add = [&](uint64_t v) { bytes.append(reinterpret_cast<const char*>(&v), sizeof v); };
  add(o.batch_size);
  add(o.shuffle_buffer);
  add(o.jpeg_decode.size());  // other images (crops) in the batches
  bytes += o.jpeg_decode;
  if (o.world_size > 1) {  // which splits are a rank's and how they are cut
    add(o.rank);
    add(o.world_size);
    add(o.drop_last);
    add(o.pad);
  }
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

Session::Impl::Impl(SessionOptions options, readers::DatasetPlan plan, LeaseTable table)
    : o_(std::move(options)),
      plan_(std::move(plan)),
      table_(std::move(table)),
      ranks_(o_.world_size),
      queue_(o_, table_.epoch(), o_.deterministic ? table_.epoch_order() : std::vector<uint64_t>()),
      deal_table_(table_) {
  if (o_.resume) counters_.bad_records = o_.resume->bad_records;
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
Status Session::Impl::start() {
  // The thread owns the promise: one on this frame could be destroyed
  // while set_value() is still returning on the other thread.
  ReceiveMemoryOptions rm;
  rm.pin = o_.pin_memory;
  rm.numa_node = o_.numa_node;
  rm.cuda_device = o_.cuda_device;
  auto memory = make_receive_memory(rm);
  if (!memory.ok()) return memory.status();
  memory_ = memory->memory;
  memory_warnings_ = memory->warnings;
  for (const std::string& w : memory_warnings_) log::error("goldminer: session: warning: " + w);
  if (memory_ != transport::pageable_memory())
    log::info("goldminer: session: receive buffers: " + memory_->describe());
  std::promise<Status> opened;
  auto listening = opened.get_future();
  loop_ = std::thread([this, opened = std::move(opened)]() mutable {
    transport::Options to;
    to.memory = memory_;
    to.receive_budget = o_.receive_budget_bytes;
    to.tcp_data_port = ucx_data_port(o_);
    auto ep = listen_or_fall_back(o_, to);
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
      w.munge = o_.munge;
      w.id = "local-" + std::to_string(i);
      w.threads = o_.local_worker_threads;
      w.load_program = o_.program_loader;
      auto r = dw::run_worker(w, local_stop_);
      if (!r.ok() && !stop_) log::error("goldminer: session: local worker " + w.id + ": " + r.status().message());
    });
  }
  if (o_.elastic.launcher) elastic_ = std::thread([this] { elastic_loop(); });
  if (o_.rank > 0 && !o_.rank0.empty()) {
    // This rank's figures for rank 0, every second (RankStatus).
    rank_link_ = std::make_unique<RankLink>(o_, peer_auth_, address_, [this] {
      wire::RankStatus st;
      std::lock_guard<std::mutex> lock(mu_);
      st.workers = static_cast<uint32_t>(counters_.per_worker.size());
      st.batches_arrived = counters_.arrived_total;
      st.left_unasked = static_cast<uint32_t>(counters_.left_unasked);
      return st;
    });
    rank_link_->start();
  }
  return Status();
}

Session::Impl::~Impl() {
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
  if (rank_link_) rank_link_->stop();
  if (loop_.joinable()) loop_.join();
  for (auto& t : local_) t.join();
  // Those the launcher started and that never joined: cancelled or told
  // to stop.
  if (o_.elastic.launcher) o_.elastic.launcher->end();
}

Expected<std::optional<SessionBatch>> Session::Impl::next(const std::function<bool()>& interrupted) {
  std::unique_lock<std::mutex> lock(mu_);
  // The consumer saw the end of the previous epoch: start the next.
  if (queue_.begin_wanted_epoch()) counters_.start_epoch();
  const auto asked = Clock::now();
  for (;;) {
    if (!failure_.ok()) return failure_;
    double fill = 0;
    while (std::optional<QueuedBatch> item = queue_.take(counters_.per_worker.size(), &fill)) {
      if (item->end_of_epoch) return std::optional<SessionBatch>();
      counters_.count_fill(fill);  // as the trainer found it
      // Over the budget when the trainer reaches the corrupt record, not
      // when a worker ahead of it reads one: a run stopped before that
      // point ends as it would have without it.
      if (item->bad_records > 0 && queue_.consumed_bad_records() > o_.max_bad_records) {
        failure_ = Status::error("input: " + std::to_string(queue_.consumed_bad_records()) +
                                 " corrupt records this epoch exceed " + "the budget of " +
                                 std::to_string(o_.max_bad_records) + " (--max-bad-records)");
        return failure_;
      }
      counters_.count_consumed();
      queue_.count_consumed(*item);
      if (item->batch.samples == 0) continue;  // a split whose records were all skipped
      return std::optional<SessionBatch>(std::move(item->batch));
    }
    if (o_.timeout_s > 0 && seconds_since(asked) >= o_.timeout_s) {
      return Status::error("no batch within " + seconds_text(o_.timeout_s) + " s (" +
                           std::to_string(counters_.per_worker.size()) + " workers connected, " +
                           std::to_string(counters_.workers_lost) + " lost with splits in hand)" +
                           companion_job_failure(o_));
    }
    const auto t0 = Clock::now();
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    counters_.add_wait(seconds_since(t0));
    if (ask_interrupted(lock, interrupted)) return Status::error(Session::kInterrupted);
  }
}

std::pair<uint64_t, uint64_t> Session::Impl::share_of_epoch() const {
  uint32_t epoch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch = queue_.position_epoch();
  }
  // The deal is a function of the epoch: a copy of the table deals it
  // here, apart from the loop thread's.
  std::lock_guard<std::mutex> lock(deal_mu_);
  if (deal_epoch_ != epoch) {
    Status s = deal_table_.start_epoch(epoch);
    if (!s.ok()) return {0, 0};  // create() dealt epoch 0 the same way; an epoch that cannot be dealt fails next()
    deal_epoch_ = epoch;
  }
  return {deal_table_.epoch_batches(), deal_table_.epoch_records()};
}

LeasePosition Session::Impl::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  LeasePosition p;
  queue_.position(&p);
  p.seed = o_.seed;
  p.plan = plan_fingerprint_;
  return p;
}

SessionMetrics Session::Impl::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  SessionMetrics m;
  m.epoch = queue_.consumer_epoch();
  m.queue_batches = queue_.queued();
  m.held_batches = queue_.held();
  m.max_queued_batches = queue_.max_queued();
  m.queue_bytes = queue_.bytes();
  m.queue_fill = queue_.fill(counters_.per_worker.size());
  counters_.fill_metrics(&m);
  return m;
}

size_t Session::Impl::drain_workers(size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  drain_requests_ += n;
  return std::min(n, counters_.per_worker.size());
}

Expected<size_t> Session::Impl::wait_for_workers(size_t n, double timeout_s, const std::function<bool()>& interrupted) {
  const auto asked = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const size_t workers = counters_.per_worker.size();
    if (workers >= n) return workers;
    if (!failure_.ok()) return failure_;
    if (seconds_since(asked) >= timeout_s)
      return Status::error("only " + std::to_string(workers) + " of " + std::to_string(n) +
                           " workers joined within " + seconds_text(timeout_s) + " s" +
                           companion_job_failure(o_));
    const auto t0 = Clock::now();
    cv_.wait_for(lock, std::chrono::milliseconds(20));
    counters_.wait_total += seconds_since(t0);  // the trainer waits for workers: elastic growth sees it
    if (ask_interrupted(lock, interrupted)) return Status::error(Session::kInterrupted);
  }
}

double Session::Impl::now() const { return seconds_since(created_); }

void Session::Impl::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok()) failure_ = Status::error(why);
  cv_.notify_all();
}

Expected<std::unique_ptr<Session>> Session::create(SessionOptions o) {
  if (o.secret.empty() && !o.munge)
    return Status::error("session: no job secret (set GOLDMINER_SECRET or a secret file) and no GOLDMINER_AUTH=munge");
  if (o.batch_size == 0) return Status::error("session: batch size must be at least 1");
  if (o.receive_budget_bytes < (uint64_t{1} << 20))
    return Status::error("session: receive budget must be at least 1 MiB");
  auto spec = readers::parse_input_spec(o.input);
  if (!spec.ok()) return spec.status();
  readers::ReaderOptions ro;
  // Each split may skip up to the whole budget; the session enforces it
  // over the epoch.
  ro.max_bad_records = o.max_bad_records;
  auto jpeg_decode = readers::parse_jpeg_decode(o.jpeg_decode);
  if (!jpeg_decode.ok()) return Status::error("session: " + jpeg_decode.status().message());
  ro.jpeg_decode = *jpeg_decode;
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
  lc.shuffle_splits = o.shuffle_splits;
  lc.trainer_rank = o.rank;
  lc.world_size = o.world_size;
  lc.batch_size = o.batch_size;
  lc.tail = o.drop_last ? RankTail::kDropLast : o.pad ? RankTail::kPad : RankTail::kSmallerBatches;
  if (o.drop_last && o.pad) return Status::error("session: drop_last and pad: one at most");
  if (o.world_size == 0 || o.rank >= o.world_size)
    return Status::error("session: rank " + std::to_string(o.rank) + " is not one of world size " +
                         std::to_string(o.world_size) + " (ranks are 0.." + (o.world_size ? std::to_string(o.world_size - 1) : "") +
                         ")");
  auto table = LeaseTable::create(std::move(splits), lc);
  if (!table.ok()) return Status::error("session: " + table.status().message());
  if (o.world_size > 1 && !o.rank0.empty()) {
    // Ranks share the job's workers through rank 0, which listens at
    // rank0; every other rank listens on its own address (any free port),
    // on the interface its packets to rank 0 leave from, and joins it.
    auto at = parse_host_port(o.rank0.rfind("ucx://", 0) == 0 ? o.rank0.substr(6) : o.rank0, "rank 0's address");
    if (!at.ok()) return at.status();
    if (o.listen.empty() || o.listen == o.rank0) {
      if (o.rank == 0) {
        o.listen = o.rank0;
      } else if (!o.rank_listen.empty()) {
        o.listen = o.rank_listen;
      } else {
        auto local = local_address_toward(at->host);
        if (!local.ok()) return Status::error("session: rank " + std::to_string(o.rank) + ": " + local.status().message());
        o.listen = "ucx://" + host_port_text(*local, 0);
      }
    }
    if (o.rank > 0) o.elastic = ElasticSetup();  // rank 0 sizes the job's workers
    // A rank without a worker never ends its epoch: at least one a rank.
    AutosizerConfig& a = o.elastic.config.autosizer;
    if (o.rank == 0 && o.elastic.launcher && a.min_workers < static_cast<int>(o.world_size)) {
      if (a.max_workers < static_cast<int>(o.world_size))
        log::error("goldminer: session: " + std::to_string(o.world_size) + " ranks share at most " +
                   std::to_string(a.max_workers) + " data workers (dw-max): ranks without one wait");
      a.min_workers = std::min(a.max_workers, static_cast<int>(o.world_size));
    }
  }
  if (o.resume) {
    if (o.resume->seed != o.seed)
      return Status::error("session: resume position was taken with seed " + std::to_string(o.resume->seed) +
                           ", this session has seed " + std::to_string(o.seed));
    if (o.resume->plan != 0 && o.resume->plan != fingerprint)
      return Status::error("session: resume position was taken on another input plan (files, record ranges per "
                           "split, batch size, shuffle buffer or rank differ): resuming would deliver other samples");
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

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;
std::string Session::address() const { return impl_->address(); }
std::string Session::receive_memory() const { return impl_->receive_memory(); }
const std::vector<std::string>& Session::receive_memory_warnings() const { return impl_->receive_memory_warnings(); }
uint64_t Session::total_records() const { return impl_->total_records(); }
const std::vector<std::string>& Session::files() const { return impl_->files(); }
const std::vector<uint64_t>& Session::records_per_file() const { return impl_->records_per_file(); }
uint64_t Session::batches_per_epoch() const { return impl_->share_of_epoch().first; }
uint64_t Session::records_per_epoch() const { return impl_->share_of_epoch().second; }
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
