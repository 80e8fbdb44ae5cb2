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

  Expected<WorkerReport> stream() {
    WorkerReport report;
    // Shared with the producers and with the completions of batch sends,
    // which may run as late as the endpoint's destructor.
    auto shared_ptr = std::make_shared<Shared>();
    Shared& shared = *shared_ptr;
    shared.ordered = stream_.ordered;
    shared.outbox_limit = std::max<size_t>(2, o_.threads * 2);
    shared.wake = [ep = ep_.get()] { ep->wake(); };
    shared.reserve = [ep = ep_.get()](size_t size) { return ep->reserve(size); };
    std::vector<std::thread> producers;
    std::vector<std::unique_ptr<Producer>> bodies;
    for (uint32_t i = 0; i < std::max<uint32_t>(1, o_.threads); ++i) {
      bodies.push_back(std::make_unique<Producer>(&shared, &dataset_, &stream_, program_.get()));
      producers.emplace_back([this, i, p = bodies.back().get()] {
        if (o_.on_producer_start) o_.on_producer_start(i);
        p->run();
      });
    }
    auto finish = [&](Status why) -> Expected<WorkerReport> {
      {
        std::lock_guard<std::mutex> lock(shared.mu);
        shared.quit = true;
        shared.cv.notify_all();
      }
      for (auto& t : producers) t.join();
      if (!why.ok()) return why;
      const transport::Endpoint::PathStats paths = ep_->path_stats();
      report.batches_shared_memory = paths.shared_memory;
      report.batches_built_in_place = paths.built_in_place;
      report.shared_memory = paths.shared_memory_status;
      return report;
    };

    uint32_t credits = 0;
    uint32_t in_hand = 0;  // splits leased and not yet finished or returned
    const uint32_t want = std::max<uint32_t>(1, o_.threads) + 1;
    Status s = send(wire::LeaseRequest{want});
    if (!s.ok()) return finish(s);
    uint32_t requested = want;
    auto last_heartbeat = Clock::now();
    auto last_heard = Clock::now();  // the last message from the trainer
    Clock::time_point drain_started;
    bool draining = false;
    bool told_to_drain = false;  // by the trainer, which then closes
    // A trainer that told this worker to drain may close before the
    // worker's last sends arrive: that ends the worker as the trainer's
    // leaving does, not as a failure.
    auto trainer_left = [&](const Status& failed) {
      if (!told_to_drain) return false;
      log::info("goldminer-dw: the trainer closed while this worker drained (" + failed.message() + ")");
      return true;
    };
    // Whether `o` may be sent now: a batch needs a credit and room in the
    // send window. shared.mu held.
    auto may_send = [&](const Outgoing& o) {
      return o.kind != Outgoing::Kind::kBatch || (credits > 0 && shared.in_flight.open(o.batch->frame_size()));
    };
    // The outbox entry to send next, or end() if none may go now: the
    // front, or (ordered) the first batch of the first split in hand;
    // when that batch may not go, a front that needs no credit (a lease
    // return, an error) still may. shared.mu held.
    auto pick = [&]() {
      auto next = shared.outbox.begin();
      if (const std::optional<uint64_t> head = shared.first_in_hand(); shared.ordered && head) {
        auto first = std::find_if(shared.outbox.begin(), shared.outbox.end(), [&](const Outgoing& x) {
          return x.kind == Outgoing::Kind::kBatch && x.split_id == *head;
        });
        if (first != shared.outbox.end()) next = first;
      }
      if (next != shared.outbox.end() && !may_send(*next))
        next = !shared.outbox.empty() && shared.outbox.front().kind != Outgoing::Kind::kBatch ? shared.outbox.begin()
                                                                                            : shared.outbox.end();
      return next;
    };
    for (;;) {
      bool sendable;
      {
        std::lock_guard<std::mutex> lock(shared.mu);
        sendable = pick() != shared.outbox.end();
      }
      // Producers wake the poll when they queue something; else it waits
      // for the trainer (or a send completion) until the next heartbeat.
      const double to_heartbeat = o_.heartbeat_s - seconds_since(last_heartbeat);
      const int wait_ms = sendable ? 0 : static_cast<int>(std::clamp(to_heartbeat * 1000, 1.0, 100.0));
      auto e = ep_->poll(wait_ms);
      if (!e.ok()) return finish(e.status());
      if (e->has_value()) {
        Event& ev = **e;
        if (ev.kind == Event::Kind::kDisconnected) {
          if (draining) break;
          return finish(Status::error("the trainer went away: " + ev.reason));
        }
        if (ev.kind == Event::Kind::kMessage) last_heard = Clock::now();
        if (ev.kind == Event::Kind::kMessage) {
          auto m = wire::decode_frame(ev.frame->data(), ev.frame->size(), ev.frame->size());
          if (!m.ok()) return finish(m.status());
          if (auto* c = std::get_if<wire::Credit>(&*m)) {
            credits += c->batches;
          } else if (auto* g = std::get_if<wire::LeaseGrant>(&*m)) {
            if (requested > 0) --requested;
            ++in_hand;
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
            draining = true;
            told_to_drain = true;
          } else if (auto* err = std::get_if<wire::Error>(&*m)) {
            return finish(Status::error("the trainer reported: " + err->message));
          }
        }
      }
      // A batch send that failed without the trainer going away first.
      if (!shared.send_error.empty()) {
        if (trainer_left(Status::error(shared.send_error))) break;
        return finish(Status::error(shared.send_error));
      }
      if (seconds_since(last_heard) > o_.trainer_timeout_s) {
        char silent[32];
        std::snprintf(silent, sizeof silent, "%.0f", seconds_since(last_heard));
        return finish(Status::error("no word from the trainer at " + trainer_ + " for " + silent +
                                    " s (--trainer-timeout): its process is stopped or its node is gone"));
      }
      if (stop_ && !draining) draining = true;
      if (draining && drain_started == Clock::time_point()) {
        drain_started = Clock::now();
        log::info("goldminer-dw: draining: finishing the batch in hand and returning leases");
        std::lock_guard<std::mutex> lock(shared.mu);
        shared.draining = true;
        // Leases not started yet go straight back.
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
      // Send what is ready, in order (ordered: the first split's batches
      // first); batches need a credit each.
      bool ended = false;  // the trainer closed while this worker drained
      for (;;) {
        Outgoing o;
        {
          std::lock_guard<std::mutex> lock(shared.mu);
          auto next = pick();
          if (next == shared.outbox.end()) break;
          o = std::move(*next);
          shared.outbox.erase(next);
          if (o.kind == Outgoing::Kind::kReturn || (o.kind == Outgoing::Kind::kBatch && o.last_of_split))
            shared.release(o.split_id);
          shared.cv.notify_all();
        }
        if (o.kind == Outgoing::Kind::kError) {
          send(wire::Error{2, o.message});
          return finish(Status::error(o.message));
        }
        if (o.kind == Outgoing::Kind::kReturn) {
          s = send(wire::LeaseReturn{o.split_id, o.message, o.failed});
          if (!s.ok() && trainer_left(s)) {
            ended = true;
            break;
          }
          if (!s.ok()) return finish(s);
          --in_hand;
          ++(o.failed ? report.splits_failed : report.splits_returned);
          continue;
        }
        // The writer goes back to the spares when its send is done.
        wire::BatchWriter* batch = o.batch.release();
        const size_t size = batch->frame_size();
        shared.in_flight.started(size);
        s = ep_->send_async(0, batch->frame_data(), size, [shared_ptr, batch, size](Status sent) {
          std::unique_ptr<wire::BatchWriter> writer(batch);
          shared_ptr->in_flight.finished(size);
          if (!sent.ok() && shared_ptr->send_error.empty()) shared_ptr->send_error = sent.message();
          std::lock_guard<std::mutex> lock(shared_ptr->mu);
          shared_ptr->spare.push_back(std::move(writer));
        });
        if (!s.ok()) {  // not started: the completion will not run
          delete batch;
          shared.in_flight.finished(size);
          if (trainer_left(s)) {
            ended = true;
            break;
          }
          return finish(s);
        }
        --credits;
        ++report.batches_sent;
        if (o.last_of_split) {
          --in_hand;
          ++report.splits_done;
        }
      }
      if (ended) break;
      // Keep `want` splits leased or asked for.
      if (!draining && in_hand + requested < want) {
        const uint32_t more = want - in_hand - requested;
        s = send(wire::LeaseRequest{more});
        if (!s.ok()) return finish(s);
        requested += more;
      }
      if (seconds_since(last_heartbeat) >= o_.heartbeat_s) {
        last_heartbeat = Clock::now();
        const uint64_t ms = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count());
        send(wire::Heartbeat{ms});
      }
      if (draining) {
        std::lock_guard<std::mutex> lock(shared.mu);
        const bool idle = shared.busy == 0 && shared.outbox.empty() && shared.in_flight.frames() == 0;
        // A lease asked for before the drain may be granted still: wait a
        // little for it (it goes straight back), so the trainer does not
        // see this worker leave with a split in hand.
        const bool grant_pending = requested > 0 && seconds_since(drain_started) < kGrantGrace_s;
        if (idle && in_hand == 0 && !grant_pending) break;
        if (seconds_since(drain_started) > o_.drain_timeout_s) {
          // No credit came for the finished batches: the trainer re-leases
          // those splits when this connection closes.
          log::error("goldminer-dw: drain timed out; leaving " + std::to_string(in_hand) + " splits to be re-leased");
          break;
        }
      }
    }
    report.drained = true;
    return finish(Status());
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
