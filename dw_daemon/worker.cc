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

#include "gmcore/lease_table.h"
#include "gmcore/log.h"
#include "gmcore/peer_auth.h"
#include "gmcore/stream_config.h"
#include "mpi_transport/transport.h"

namespace goldminer::dw {
namespace {

using Clock = std::chrono::steady_clock;
using transport::Event;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// How long a draining worker waits for grants of leases it asked for.
constexpr double kGrantGrace_s = 1.0;

// The most of a failed split's cause sent to the trainer (bytes).
constexpr size_t kMaxFailureText = 4096;

uint64_t batch_seed(uint64_t split_seed, uint32_t sequence) {
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
Status with_context(const Status& s, const std::string& context) {
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

  void run() {
    for (;;) {
      wire::LeaseGrant lease;
      {
        std::unique_lock<std::mutex> lock(s_->mu);
        s_->cv.wait(lock, [&] { return s_->quit || s_->draining || !s_->leases.empty(); });
        if (s_->quit || s_->draining) return;
        auto next = s_->leases.begin();
        if (s_->ordered)
          next = std::min_element(s_->leases.begin(), s_->leases.end(), [](const auto& a, const auto& b) {
            return std::make_pair(a.epoch, a.rank) < std::make_pair(b.epoch, b.rank);
          });
        lease = std::move(*next);
        s_->leases.erase(next);
        ++s_->busy;
      }
      Status st = work(lease);
      // A failure of this worker's environment (its Python process
      // killed, a read error of the OS) is not the input's: the split goes
      // back to the trainer, which re-leases it (to another worker while
      // one may take it), and this worker goes on with its next split (a
      // Python program starts a new process for it). Any other error (a
      // corrupt record beyond max_bad_records, the program's own
      // exception) would fail on every worker: it ends the run.
      if (!st.ok() && st.is_environment_error())
        log::error("goldminer-dw: split " + std::to_string(lease.split_id) + " of " + lease.file +
                   " failed here, given back to be re-run: " + st.message());
      {
        std::lock_guard<std::mutex> lock(s_->mu);
        --s_->busy;
        if (!st.ok() && st.is_environment_error()) {
          Outgoing r;
          r.kind = Outgoing::Kind::kReturn;
          r.split_id = lease.split_id;
          r.message = st.message().substr(0, kMaxFailureText);  // a Python traceback may be long
          r.failed = true;
          s_->outbox.push_back(std::move(r));
        } else if (!st.ok()) {
          Outgoing e;
          e.kind = Outgoing::Kind::kError;
          e.message = st.message();
          s_->outbox.push_back(std::move(e));
          s_->quit = true;
        }
        s_->cv.notify_all();
      }
      s_->wake();
    }
  }

 private:
  // Pushes `o` once the outbox has room (ordered: the first split in
  // hand has twice the room, so that its batches need not wait behind
  // later splits' that have no credit yet); false if the worker is quitting.
  bool push(Outgoing o) {
    std::unique_lock<std::mutex> lock(s_->mu);
    s_->cv.wait(lock, [&] {
      const bool first = s_->ordered && s_->first_in_hand() == o.split_id;
      return s_->quit || s_->outbox.size() < (first ? 2 : 1) * s_->outbox_limit;
    });
    if (s_->quit) return false;
    s_->outbox.push_back(std::move(o));
    s_->cv.notify_all();
    lock.unlock();
    s_->wake();
    return true;
  }

  std::unique_ptr<wire::BatchWriter> writer() {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (s_->spare.empty()) return std::make_unique<wire::BatchWriter>();
    auto w = std::move(s_->spare.back());
    s_->spare.pop_back();
    return w;
  }

  bool draining() {
    std::lock_guard<std::mutex> lock(s_->mu);
    return s_->draining || s_->quit;
  }

  Status give_back(uint64_t split_id, const std::string& why) {
    Outgoing r;
    r.kind = Outgoing::Kind::kReturn;
    r.split_id = split_id;
    r.message = why;
    push(std::move(r));
    return Status();
  }

  Status work(const wire::LeaseGrant& g) {
    readers::SplitRange range;
    range.file_index = g.file_index;
    range.first_record = g.begin;
    range.records = g.end - g.begin;
    range.byte_offset = g.offset;
    range.skip = g.skip;
    if (program_ != nullptr && program_->generates_batches()) return work_generated(g, range);
    auto stream = readers::SplitStream::open(*dataset_, range, g.seed, stream_->batch_size, stream_->shuffle_buffer,
                                             g.batches);
    if (!stream.ok()) return stream.status();
    auto current = (*stream)->next();
    if (!current.ok()) return current.status();
    uint32_t sequence = 0;
    bool first = true;
    for (;;) {
      if (draining()) return give_back(g.split_id, "worker draining");
      const bool empty_split = first && !current->has_value();
      if (!empty_split && !current->has_value()) return Status();
      first = false;
      auto following = empty_split ? Expected<std::optional<readers::Batch>>(std::optional<readers::Batch>())
                                   : (*stream)->next();
      if (!following.ok()) return following.status();
      const bool last = !following->has_value();
      if (sequence >= g.skip_batches) {
        readers::Batch empty;
        const readers::Batch& b = empty_split ? empty : **current;
        Status why;
        if (!queue(g, last, make_batch(g, sequence, last, b), &why)) return why;
      }
      if (last) return Status();
      ++sequence;
      current = std::move(following);
    }
  }

  // A program that makes the split's batches itself: each as it comes,
  // from the first not yet delivered, then an empty last one.
  Status work_generated(const wire::LeaseGrant& g, const readers::SplitRange& range) {
    auto gen = program_->generate(range, g.seed, g.epoch);
    if (!gen.ok()) return with_context(gen.status(), " (split " + std::to_string(g.split_id) + ")");
    for (uint64_t sequence = g.skip_batches;; ++sequence) {
      if (draining()) return give_back(g.split_id, "worker draining");
      auto next = (*gen)->next(sequence);
      if (!next.ok())
        return with_context(next.status(),
                            " (split " + std::to_string(g.split_id) + ", batch " + std::to_string(sequence) + ")");
      const bool last = !next->has_value();
      std::vector<View> views;
      std::vector<uint64_t> none;
      if (!last)
        for (const auto& t : (*next)->output->tensors()) views.push_back({t.dtype, t.shape, t.data, t.nbytes});
      Status why;
      if (!queue(g, last, frame(g, static_cast<uint32_t>(sequence), last, views, last ? none : (*next)->records, 0),
                 &why))
        return why;
      if (last) return Status();
    }
  }

  // Queues a made batch of g's split for sending. False: stop working on
  // the split, with *why the error (OK: the worker is stopping).
  bool queue(const wire::LeaseGrant& g, bool last, Expected<std::unique_ptr<wire::BatchWriter>> made, Status* why) {
    if (!made.ok()) {
      *why = made.status();
      return false;
    }
    Outgoing o;
    o.batch = std::move(made).value();
    o.last_of_split = last;
    o.split_id = g.split_id;
    return push(std::move(o));
  }

  struct View {
    wire::DType dtype;
    std::vector<int64_t> shape;
    const void* data;
    uint64_t nbytes;
  };

  Expected<std::unique_ptr<wire::BatchWriter>> make_batch(const wire::LeaseGrant& g, uint32_t sequence, bool last,
                                                         const readers::Batch& b) {
    std::vector<View> views;
    std::unique_ptr<ProgramOutput> out;
    if (program_ != nullptr && !b.records.empty()) {
      auto r = program_->run(b, batch_seed(g.seed, sequence), g.epoch);
      if (!r.ok())
        return with_context(r.status(), " (split " + std::to_string(g.split_id) + " of " + g.file + ", batch " +
                                            std::to_string(sequence) + ")");
      out = std::move(r).value();
      for (const auto& t : out->tensors()) views.push_back({t.dtype, t.shape, t.data, t.nbytes});
    } else if (!b.records.empty()) {
      for (const auto& t : b.tensors) views.push_back({t.dtype, t.shape, t.data.data(), t.data.size()});
    }
    return frame(g, sequence, last, views, b.records, b.bad_records);
  }

  // The wire batch of `views` plus the sample ids (file index, record).
  Expected<std::unique_ptr<wire::BatchWriter>> frame(const wire::LeaseGrant& g, uint32_t sequence, bool last,
                                                    const std::vector<View>& views,
                                                    const std::vector<uint64_t>& records, uint64_t bad_records) {
    std::vector<wire::BatchWriter::TensorSpec> specs;
    for (const auto& v : views) specs.push_back({v.dtype, v.shape});
    const int64_t n = static_cast<int64_t>(records.size());
    specs.push_back({wire::DType::kInt64, {n, 2}});
    wire::BatchHeader h;
    h.split_id = g.split_id;
    h.sequence = sequence;
    h.last_of_split = last;
    h.samples = static_cast<uint32_t>(n);
    h.bad_records = static_cast<uint32_t>(bad_records);
    // Built straight in the transport's shared memory where it has room,
    // so that the copy below is the only one on this side.
    auto size = wire::BatchWriter::frame_size_for(specs);
    if (!size.ok()) return size.status();
    auto w = writer();
    Status s = w->reset(h, specs, s_->reserve(*size));
    if (!s.ok()) return s;
    for (size_t i = 0; i < views.size(); ++i) {
      if (views[i].nbytes != w->tensor_bytes(i))
        return Status::error("program output " + std::to_string(i) + ": " + std::to_string(views[i].nbytes) +
                             " bytes for its shape's " + std::to_string(w->tensor_bytes(i)));
      std::memcpy(w->tensor_data(i), views[i].data, views[i].nbytes);  // the one copy
    }
    auto* ids = reinterpret_cast<int64_t*>(w->tensor_data(views.size()));
    for (int64_t i = 0; i < n; ++i) {
      ids[2 * i] = g.file_index;
      ids[2 * i + 1] = static_cast<int64_t>(records[i]);
    }
    return w;
  }

  Shared* s_;
  const readers::DatasetConfig* dataset_;
  const StreamConfig* stream_;
  WorkerProgram* program_;
};

class Connection {
 public:
  Connection(const WorkerOptions& o, const std::atomic<bool>& stop) : o_(o), stop_(stop), trainer_(o.trainer) {}

  Expected<WorkerReport> run() {
    // The trainer may not listen yet (started at the same time): retry
    // until the connect timeout.
    const auto start = Clock::now();
    auto checked = start;
    bool asked = false;  // trainer_gone: at the first miss, then every trainer_check_s
    for (;;) {
      transport::Options options;
      options.shm_arena_bytes = size_t{o_.shm_mb} << 20;
      options.verify_trainer = true;  // small frames only until the trainer has proved the job
      auto ep = transport::connect(trainer_, options);
      Status s = ep.ok() ? Status() : ep.status();
      if (ep.ok()) {
        ep_ = std::move(ep).value();
        reached_ = false;
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
      if (reached_ || seconds_since(start) > o_.connect_timeout_s) return s;
      ep_.reset();
      if (o_.trainer_gone && (!asked || seconds_since(checked) >= o_.trainer_check_s)) {
        asked = true;
        checked = Clock::now();
        if (std::string why = o_.trainer_gone(); !why.empty()) return Status::error(std::string(kTrainerGone) + why);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
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
    auto m = receive(std::min(5.0, o_.connect_timeout_s), &keep);
    if (!m.ok()) return m.status();
    auto* c = std::get_if<wire::Challenge>(&*m);
    if (c == nullptr) return Status::error("the trainer sent no challenge");
    reached_ = true;  // from here on, failures are final
    // The trainer proves the job first; a trainer that does not gets no
    // proof from this worker, and its Program (or pickle) is never read.
    auto answer = auth::answer(auth::PeerAuth{o_.secret, o_.munge}, *nonce, *target, *c);
    if (!answer.ok()) {
      send(wire::Error{1, "the worker refuses this trainer: " + answer.status().message()});
      return Status::error("authentication: " + answer.status().message());
    }
    ep_->authenticated(0);  // the trainer proved the job: its Program may be large
    s = send(*answer);
    if (!s.ok()) return s;
    m = receive(o_.connect_timeout_s, &keep);
    if (!m.ok()) return m.status();
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
          } else if (auto* err = std::get_if<wire::Error>(&*m)) {
            return finish(Status::error("the trainer reported: " + err->message));
          }
        }
      }
      // A batch send that failed without the trainer going away first.
      if (!shared.send_error.empty()) return finish(Status::error(shared.send_error));
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
          return finish(s);
        }
        --credits;
        ++report.batches_sent;
        if (o.last_of_split) {
          --in_hand;
          ++report.splits_done;
        }
      }
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
  bool reached_ = false;
};

}  // namespace

std::string default_worker_id() {
  // A Slurm task's node name: several nodes may share one host name (a
  // devcluster without namespaces, or a site whose node names are aliases).
  const char* node = std::getenv("SLURMD_NODENAME");
  char host[256] = "";
  if (node == nullptr || *node == '\0') {
    gethostname(host, sizeof host - 1);
    node = host;
  }
  return std::string(node) + ":" + std::to_string(getpid());
}

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
