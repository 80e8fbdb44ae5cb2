#include "dw_daemon/worker.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <deque>
#include <mutex>
#include <map>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "dw_daemon/producer.h"
#include "gmcore/lease_table.h"
#include "gmcore/log.h"
#include "launch/node_address.h"
#include "gmcore/peer_auth.h"
#include "gmcore/stream_config.h"
#include "mpi_transport/transport.h"

namespace goldminer::dw {
namespace {

using transport::Event;
using namespace producer_internal;  // Clock, Shared, Producer, ...

class Connection {
 public:
  Connection(const WorkerOptions& o, const std::atomic<bool>& stop) : o_(o), stop_(stop), trainer_(o.trainer) {}

  Expected<WorkerReport> run() {
    // The trainer may not listen yet (started at the same time): retry
    // until the connect timeout.
    const auto start = Clock::now();
    auto checked = start;
    bool asked = false;  // trainer_gone: at the first miss, then every trainer_check_s
    auto looked = start;  // published_trainer: when last asked
    bool looked_once = false;
    for (;;) {
      transport::Options options;
      options.shm_arena_bytes = size_t{o_.shm_mb} << 20;
      options.verify_trainer = true;  // small frames only until the trainer has proved the job
      auto ep = transport::connect(trainer_, options);
      Status s = ep.ok() ? Status() : ep.status();
      reached_ = answered_ = unproven_ = false;
      if (ep.ok()) {
        ep_ = std::move(ep).value();
        s = handshake();
      }
      if (s.ok()) break;
      if (!redirect_.empty()) {
        // Rank 0 of a data-parallel job sends this worker to another rank
        // (gmcore/rank_share.h): once; that rank's session does not.
        if (redirected_) return Status::error("redirected twice: from " + o_.trainer + " to " + trainer_ + " to " + redirect_);
        log::info("goldminer-dw: the trainer at " + trainer_ + " sends this worker to rank " + redirect_);
        redirected_ = true;
        trainer_ = redirect_;
        redirect_.clear();
        ep_.reset();
        continue;
      }
      // Stopped while the trainer was still out of reach (SIGTERM to a
      // worker whose trainer never listened): nothing to drain.
      if (stop_ && !reached_) return Status::error(kStopped);
      // Something at the address that did not prove the job (another
      // user's process on the port the job's trainer could not bind): the
      // trainer may have published where it listens instead.
      const bool look_elsewhere = unproven_ && o_.published_trainer && !redirected_;
      if (look_elsewhere && !unproven_since_) {
        unproven_since_ = Clock::now();
        unproven_why_ = s.message();
        log::error("goldminer-dw: the process at " + trainer_ + " did not prove the job (" + s.message() +
                   "); looking for the address the trainer published, for up to " +
                   std::to_string(static_cast<int>(o_.rediscover_timeout_s)) + " s");
      }
      if (reached_ && !look_elsewhere) return s;
      if (unproven_since_ && seconds_since(*unproven_since_) > o_.rediscover_timeout_s)
        return Status::error("the process at " + trainer_ + " did not prove the job (" + unproven_why_ +
                             "), and the trainer published no other address within " +
                             std::to_string(static_cast<int>(o_.rediscover_timeout_s)) + " s");
      if (!unproven_since_ && seconds_since(start) > o_.connect_timeout_s) return s;
      ep_.reset();
      if (o_.trainer_gone && (!asked || seconds_since(checked) >= o_.trainer_check_s)) {
        asked = true;
        checked = Clock::now();
        if (std::string why = o_.trainer_gone(); !why.empty()) return Status::error(std::string(kTrainerGone) + why);
      }
      // Asked often once something not the trainer answered at its
      // address, else as rarely as trainer_gone (every worker of a job
      // waiting for its trainer asks slurmctld).
      const bool suspect = unproven_since_ || answered_;
      if (o_.published_trainer && !redirected_ &&
          (!looked_once || seconds_since(looked) >= (suspect ? o_.rediscover_interval_s : o_.trainer_check_s))) {
        looked_once = true;
        looked = Clock::now();
        if (std::string at = o_.published_trainer(); !at.empty() && at != trainer_) {
          log::info("goldminer-dw: the trainer published that it listens at " + at + " (not " + trainer_ + ")");
          trainer_ = at;
          continue;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(unproven_since_ ? 1000 : 200));
    }
    return stream();
  }

 private:
  Status send(const wire::Message& m) {
    auto frame = wire::encode(m);
    return ep_->send(0, frame.data(), frame.size());
  }

  // Waits for the next message from the trainer.
  Expected<wire::Message> receive(double timeout_s, std::shared_ptr<const transport::Frame>* keep) {
    const auto start = Clock::now();
    while (seconds_since(start) < timeout_s) {
      if (stop_) return Status::error(kStopped);
      auto e = ep_->poll(50);
      if (!e.ok()) return e.status();
      if (!e->has_value()) continue;
      Event& ev = **e;
      if (ev.kind == Event::Kind::kDisconnected) return Status::error("the trainer closed the connection: " + ev.reason);
      if (ev.kind != Event::Kind::kMessage) continue;
      auto m = wire::decode_frame(ev.frame->data(), ev.frame->size(), ev.frame->size());
      if (!m.ok()) return m.status();
      if (auto* err = std::get_if<wire::Error>(&*m)) return Status::error("the trainer refused: " + err->message);
      *keep = std::move(ev.frame);
      return m;
    }
    return Status::error("no answer from the trainer at " + trainer_ + " within " +
                         std::to_string(static_cast<int>(timeout_s)) + " s");
  }

  Status handshake() {
    auto nonce = auth::random_nonce();
    if (!nonce.ok()) return nonce.status();
    // Both proofs name the address dialed: a relay at another gains nothing.
    auto target = auth::dialed_address(trainer_);
    if (!target.ok()) return target.status();
    Status s = send(wire::Hello{o_.id, o_.threads, *nonce, wire::PeerRole::kWorker, *target});
    if (!s.ok()) return Status::error("cannot reach the trainer at " + trainer_ + ": " + s.message());
    std::shared_ptr<const transport::Frame> keep;
    answered_ = true;  // something accepted the connection
    auto m = receive(std::min(5.0, o_.connect_timeout_s), &keep);
    if (!m.ok()) return m.status();
    auto* c = std::get_if<wire::Challenge>(&*m);
    if (c == nullptr) return Status::error("the trainer sent no challenge");
    reached_ = true;  // from here on, failures are final
    // The trainer proves the job first; a trainer that does not gets no
    // proof from this worker, and its Program (or pickle) is never read.
    auto answer = auth::answer(auth::PeerAuth{o_.secret, o_.munge}, *nonce, *target, *c);
    if (!answer.ok()) {
      unproven_ = true;
      send(wire::Error{1, "the worker refuses this trainer: " + answer.status().message()});
      return Status::error("authentication: " + answer.status().message());
    }
    ep_->authenticated(0);  // the trainer proved the job: its Program may be large
    s = send(*answer);
    if (!s.ok()) return s;
    // Rank 0 of ranks that share workers holds a worker until every rank
    // has joined, sending heartbeats meanwhile.
    const auto asked = Clock::now();
    do {
      m = receive(std::max(0.0, o_.connect_timeout_s - seconds_since(asked)), &keep);
      if (!m.ok()) return m.status();
    } while (std::holds_alternative<wire::Heartbeat>(*m));
    if (auto* r = std::get_if<wire::Redirect>(&*m)) {
      redirect_ = r->address;
      return Status::error("redirected to " + r->address);
    }
    auto* p = std::get_if<wire::Program>(&*m);
    if (p == nullptr) return Status::error("the trainer sent no program");
    s = setup(*p);
    // What fails here would fail on every worker: the trainer must know.
    if (!s.ok()) send(wire::Error{3, s.message()});
    return s;
  }

  Status setup(const wire::Program& p) {
    auto stream = StreamConfig::decode(p.reader_config);
    if (!stream.ok()) return stream.status();
    stream_ = std::move(stream).value();
    auto dataset = readers::DatasetConfig::decode(stream_.dataset);
    if (!dataset.ok()) return dataset.status();
    dataset_ = std::move(dataset).value();
    if (!p.program.empty()) {
      if (!o_.load_program) return Status::error("the trainer sent a program, and this worker cannot run programs");
      auto prog = o_.load_program(p.program);
      if (!prog.ok()) return prog.status();
      program_ = std::move(prog).value();
      program_->warm_up(program_->serializes_calls() ? 1 : static_cast<int>(std::max<uint32_t>(1, o_.threads)));
      if (program_->serializes_calls() && o_.threads > 1)
        log::info("goldminer-dw: the program may draw random numbers, so its calls run one at a time (torch's "
                  "generator is process-wide and each batch gets its own seed); the " +
                  std::to_string(o_.threads) + " threads overlap only reading and sending");
    }
    return Status();
  }

  // What the stream keeps between its steps: the state shared with the
  // producers and with the completions of batch sends (which may run as
  // late as the endpoint's destructor), the producers, the credits and
  // leases, the clocks, the drain.
  struct StreamState {
    std::shared_ptr<Shared> shared_ptr = std::make_shared<Shared>();
    Shared& shared = *shared_ptr;
    std::vector<std::thread> producers;
    std::vector<std::unique_ptr<Producer>> bodies;
    WorkerReport report;
    uint32_t credits = 0;
    uint32_t in_hand = 0;    // splits leased and not yet finished or returned
    uint32_t want = 1;       // splits to keep leased or asked for
    uint32_t requested = 0;  // asked for, not granted yet
    Clock::time_point last_heartbeat = Clock::now();
    Clock::time_point last_heard = Clock::now();  // the last message from the trainer
    Clock::time_point drain_started;
    bool draining = false;
    bool told_to_drain = false;  // by the trainer, which then closes
  };

  // What a step of the stream says: go on, end it (drained, or the trainer
  // left while this worker drained), or fail with `why`.
  struct Step {
    enum Kind { kGoOn, kEnd, kFail } kind = kGoOn;
    Status why;
  };
  static Step fail_with(Status why) { return Step{Step::kFail, std::move(why)}; }

  // Leases, reads, runs the program and sends batches until the trainer
  // drains this worker (or it is stopped) or the stream fails.
  Expected<WorkerReport> stream() {
    StreamState st;
    start_producers(st);
    st.want = std::max<uint32_t>(1, o_.threads) + 1;
    Status s = send(wire::LeaseRequest{st.want});
    if (!s.ok()) return finish(st, s);
    st.requested = st.want;
    for (;;) {
      Step step = take_event(st);
      if (step.kind == Step::kGoOn) step = check_trainer(st);
      if (step.kind == Step::kGoOn) {
        if (stop_ && !st.draining) st.draining = true;
        if (st.draining && st.drain_started == Clock::time_point()) start_drain(st);
        step = send_ready(st);
      }
      if (step.kind == Step::kGoOn) step = keep_leased(st);
      if (step.kind == Step::kGoOn) step = drained(st);
      if (step.kind == Step::kFail) return finish(st, step.why);
      if (step.kind == Step::kEnd) break;
    }
    st.report.drained = true;
    return finish(st, Status());
  }

  void start_producers(StreamState& st) {
    Shared& shared = st.shared;
    shared.ordered = stream_.ordered;
    shared.outbox_limit = std::max<size_t>(2, o_.threads * 2);
    shared.wake = [ep = ep_.get()] { ep->wake(); };
    shared.reserve = [ep = ep_.get()](size_t size) { return ep->reserve(size); };
    for (uint32_t i = 0; i < std::max<uint32_t>(1, o_.threads); ++i) {
      st.bodies.push_back(std::make_unique<Producer>(&shared, &dataset_, &stream_, program_.get()));
      st.producers.emplace_back([this, i, p = st.bodies.back().get()] {
        if (o_.on_producer_start) o_.on_producer_start(i);
        p->run();
      });
    }
  }

  // Stops the producers; the report, or `why` when it is an error.
  Expected<WorkerReport> finish(StreamState& st, Status why) {
    {
      std::lock_guard<std::mutex> lock(st.shared.mu);
      st.shared.quit = true;
      st.shared.cv.notify_all();
    }
    for (auto& t : st.producers) t.join();
    if (!why.ok()) return why;
    const transport::Endpoint::PathStats paths = ep_->path_stats();
    st.report.batches_shared_memory = paths.shared_memory;
    st.report.batches_built_in_place = paths.built_in_place;
    st.report.shared_memory = paths.shared_memory_status;
    return st.report;
  }

  // A trainer that told this worker to drain may close before the
  // worker's last sends arrive: that ends the worker as the trainer's
  // leaving does, not as a failure.
  static bool trainer_left(const StreamState& st, const Status& failed) {
    if (!st.told_to_drain) return false;
    log::info("goldminer-dw: the trainer closed while this worker drained (" + failed.message() + ")");
    return true;
  }

  // Whether `o` may be sent now: a batch needs a credit and room in the
  // send window. shared.mu held.
  static bool may_send(StreamState& st, const Outgoing& o) {
    return o.kind != Outgoing::Kind::kBatch || (st.credits > 0 && st.shared.in_flight.open(o.batch->frame_size()));
  }

  // The outbox entry to send next, or end() if none may go now: the
  // front, or (ordered) the first batch of the first split in hand; when
  // that batch may not go, a front that needs no credit (a lease return,
  // an error) still may. shared.mu held.
  static std::deque<Outgoing>::iterator pick(StreamState& st) {
    Shared& shared = st.shared;
    auto next = shared.outbox.begin();
    if (const std::optional<uint64_t> head = shared.first_in_hand(); shared.ordered && head) {
      auto first = std::find_if(shared.outbox.begin(), shared.outbox.end(), [&](const Outgoing& x) {
        return x.kind == Outgoing::Kind::kBatch && x.split_id == *head;
      });
      if (first != shared.outbox.end()) next = first;
    }
    if (next != shared.outbox.end() && !may_send(st, *next))
      next = !shared.outbox.empty() && shared.outbox.front().kind != Outgoing::Kind::kBatch ? shared.outbox.begin()
                                                                                          : shared.outbox.end();
    return next;
  }

  // Waits for the trainer (not at all when something may be sent: the
  // producers wake the poll when they queue something; else until the
  // next heartbeat) and takes what it sent: credits, leases, a drain.
  Step take_event(StreamState& st) {
    Shared& shared = st.shared;
    bool sendable;
    {
      std::lock_guard<std::mutex> lock(shared.mu);
      sendable = pick(st) != shared.outbox.end();
    }
    const double to_heartbeat = o_.heartbeat_s - seconds_since(st.last_heartbeat);
    const int wait_ms = sendable ? 0 : static_cast<int>(std::clamp(to_heartbeat * 1000, 1.0, 100.0));
    auto e = ep_->poll(wait_ms);
    if (!e.ok()) return fail_with(e.status());
    if (!e->has_value()) return Step{};
    Event& ev = **e;
    if (ev.kind == Event::Kind::kDisconnected) {
      if (st.draining) return Step{Step::kEnd, Status()};
      return fail_with(Status::error("the trainer went away: " + ev.reason));
    }
    if (ev.kind != Event::Kind::kMessage) return Step{};
    st.last_heard = Clock::now();
    auto m = wire::decode_frame(ev.frame->data(), ev.frame->size(), ev.frame->size());
    if (!m.ok()) return fail_with(m.status());
    if (auto* c = std::get_if<wire::Credit>(&*m)) {
      st.credits += c->batches;
    } else if (auto* g = std::get_if<wire::LeaseGrant>(&*m)) {
      if (st.requested > 0) --st.requested;
      ++st.in_hand;
      std::lock_guard<std::mutex> lock(shared.mu);
      shared.in_hand[{g->epoch, g->rank}] = g->split_id;
      if (shared.draining) {  // granted before the trainer saw us drain
        Outgoing r;
        r.kind = Outgoing::Kind::kReturn;
        r.split_id = g->split_id;
        r.message = "worker draining";
        shared.outbox.push_back(std::move(r));
      } else {
        shared.leases.push_back(std::move(*g));
      }
      shared.cv.notify_all();
    } else if (std::get_if<wire::Drain>(&*m)) {
      st.draining = true;
      st.told_to_drain = true;
    } else if (auto* err = std::get_if<wire::Error>(&*m)) {
      return fail_with(Status::error("the trainer reported: " + err->message));
    }
    return Step{};
  }

  // A batch send that failed without the trainer going away first; a
  // trainer silent for longer than --trainer-timeout.
  Step check_trainer(StreamState& st) {
    if (!st.shared.send_error.empty()) {
      if (trainer_left(st, Status::error(st.shared.send_error))) return Step{Step::kEnd, Status()};
      return fail_with(Status::error(st.shared.send_error));
    }
    if (seconds_since(st.last_heard) > o_.trainer_timeout_s) {
      char silent[32];
      std::snprintf(silent, sizeof silent, "%.0f", seconds_since(st.last_heard));
      return fail_with(Status::error("no word from the trainer at " + trainer_ + " for " + silent +
                                     " s (--trainer-timeout): its process is stopped or its node is gone"));
    }
    return Step{};
  }

  // The producers finish the batch in hand; leases not started yet go
  // straight back.
  void start_drain(StreamState& st) {
    st.drain_started = Clock::now();
    log::info("goldminer-dw: draining: finishing the batch in hand and returning leases");
    Shared& shared = st.shared;
    std::lock_guard<std::mutex> lock(shared.mu);
    shared.draining = true;
    while (!shared.leases.empty()) {
      Outgoing r;
      r.kind = Outgoing::Kind::kReturn;
      r.split_id = shared.leases.front().split_id;
      r.message = "worker draining";
      shared.leases.pop_front();
      shared.outbox.push_back(std::move(r));
    }
    shared.cv.notify_all();
  }

  // Sends what is ready, in order (ordered: the first split's batches
  // first); batches need a credit each.
  Step send_ready(StreamState& st) {
    Shared& shared = st.shared;
    for (;;) {
      Outgoing o;
      {
        std::lock_guard<std::mutex> lock(shared.mu);
        auto next = pick(st);
        if (next == shared.outbox.end()) break;
        o = std::move(*next);
        shared.outbox.erase(next);
        if (o.kind == Outgoing::Kind::kReturn || (o.kind == Outgoing::Kind::kBatch && o.last_of_split))
          shared.release(o.split_id);
        shared.cv.notify_all();
      }
      if (o.kind == Outgoing::Kind::kError) {
        send(wire::Error{2, o.message});
        return fail_with(Status::error(o.message));
      }
      if (o.kind == Outgoing::Kind::kReturn) {
        Status s = send(wire::LeaseReturn{o.split_id, o.message, o.failed});
        if (!s.ok()) return trainer_left(st, s) ? Step{Step::kEnd, Status()} : fail_with(s);
        --st.in_hand;
        ++(o.failed ? st.report.splits_failed : st.report.splits_returned);
        continue;
      }
      // The writer goes back to the spares when its send is done.
      wire::BatchWriter* batch = o.batch.release();
      const size_t size = batch->frame_size();
      shared.in_flight.started(size);
      Status s = ep_->send_async(0, batch->frame_data(), size, [shared_ptr = st.shared_ptr, batch, size](Status sent) {
        std::unique_ptr<wire::BatchWriter> writer(batch);
        shared_ptr->in_flight.finished(size);
        if (!sent.ok() && shared_ptr->send_error.empty()) shared_ptr->send_error = sent.message();
        std::lock_guard<std::mutex> lock(shared_ptr->mu);
        shared_ptr->spare.push_back(std::move(writer));
      });
      if (!s.ok()) {  // not started: the completion will not run
        delete batch;
        shared.in_flight.finished(size);
        return trainer_left(st, s) ? Step{Step::kEnd, Status()} : fail_with(s);
      }
      --st.credits;
      ++st.report.batches_sent;
      if (o.last_of_split) {
        --st.in_hand;
        ++st.report.splits_done;
      }
    }
    return Step{};
  }

  // Keeps `want` splits leased or asked for (not while draining), and
  // the heartbeat.
  Step keep_leased(StreamState& st) {
    if (!st.draining && st.in_hand + st.requested < st.want) {
      const uint32_t more = st.want - st.in_hand - st.requested;
      Status s = send(wire::LeaseRequest{more});
      if (!s.ok()) return fail_with(s);
      st.requested += more;
    }
    if (seconds_since(st.last_heartbeat) >= o_.heartbeat_s) {
      st.last_heartbeat = Clock::now();
      const uint64_t ms = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count());
      send(wire::Heartbeat{ms});
    }
    return Step{};
  }

  // Draining: ends once nothing is in hand, queued or in flight (waiting a
  // little for a lease asked for before the drain, which goes straight
  // back, so the trainer does not see this worker leave with a split in
  // hand), or after --drain-timeout.
  Step drained(StreamState& st) {
    if (!st.draining) return Step{};
    std::lock_guard<std::mutex> lock(st.shared.mu);
    const bool idle = st.shared.busy == 0 && st.shared.outbox.empty() && st.shared.in_flight.frames() == 0;
    const bool grant_pending = st.requested > 0 && seconds_since(st.drain_started) < kGrantGrace_s;
    if (idle && st.in_hand == 0 && !grant_pending) return Step{Step::kEnd, Status()};
    if (seconds_since(st.drain_started) > o_.drain_timeout_s) {
      // No credit came for the finished batches: the trainer re-leases
      // those splits when this connection closes.
      log::error("goldminer-dw: drain timed out; leaving " + std::to_string(st.in_hand) + " splits to be re-leased");
      return Step{Step::kEnd, Status()};
    }
    return Step{};
  }

  const WorkerOptions& o_;
  const std::atomic<bool>& stop_;
  std::string trainer_;   // o_.trainer, or the rank it was redirected to
  std::string redirect_;  // set by handshake() when the trainer redirects
  bool redirected_ = false;
  std::unique_ptr<transport::Endpoint> ep_;
  StreamConfig stream_;
  readers::DatasetConfig dataset_;
  std::unique_ptr<WorkerProgram> program_;
  bool reached_ = false;   // this attempt got a challenge
  bool answered_ = false;  // this attempt's connection was accepted
  bool unproven_ = false;  // this attempt's peer did not prove the job
  std::optional<Clock::time_point> unproven_since_;  // the first such peer
  std::string unproven_why_;
};

}  // namespace

std::string default_worker_id() { return node_name() + ":" + std::to_string(getpid()); }

const char* const kStopped = "stopped before the trainer answered";
const char* const kTrainerGone = "the trainer will not come: ";

Expected<WorkerReport> run_worker(const WorkerOptions& options, const std::atomic<bool>& stop) {
  if (options.trainer.empty()) return Status::error("no trainer address (--trainer or GOLDMINER_TRAINER)");
  if (options.secret.empty() && !options.munge)
    return Status::error("no job secret (GOLDMINER_SECRET or --secret-file) and no GOLDMINER_AUTH=munge");
  Connection c(options, stop);
  return c.run();
}

}  // namespace goldminer::dw
