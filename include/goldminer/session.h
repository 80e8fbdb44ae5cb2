// goldminer::Session: the trainer side of the data plane.
//
// A Session listens for data workers (goldminer-dw), admits only those that
// prove they hold the job secret, ships them the worker program and the
// reader configuration, leases them input splits and hands the batches they
// send to the training loop, each sample exactly once per epoch, while
// workers join, leave, crash or are preempted.
//
//   goldminer::SessionOptions o;
//   o.input = "criteo-tsv:/data/day_0,/data/day_1";
//   o.secret = ...;                      // also given to the workers
//   auto s = goldminer::Session::create(o);
//   // start workers with GOLDMINER_TRAINER=(*s)->address()
//   for (const goldminer::SessionBatch& b : (*s)->epoch())  // one epoch
//     use(b.tensors);                    // views into the received buffer
//   if (!(*s)->status().ok()) ...        // why an epoch ended early
// or, with the error at hand, next() until it returns nothing.
//
// Thread-safety: next(), state() and metrics() may be called from any one
// consumer thread; a background thread owns the network.
#ifndef GOLDMINER_INCLUDE_SESSION_H_
#define GOLDMINER_INCLUDE_SESSION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmcore/lease_table.h"
#include "gmcore/peer_auth.h"
#include "gmcore/status.h"
#include "gmcore/wire.h"
#include "goldminer/elastic.h"
#include "goldminer/program_loader.h"

namespace goldminer {

// Samples per batch when none is given (SessionOptions, goldminer.Session).
inline constexpr uint32_t kDefaultBatchSize = 256;

struct SessionOptions {
  // Where workers connect: ucx://HOST:PORT (PORT 0: any), mpi://, local://NAME.
  std::string listen = "ucx://127.0.0.1:0";
  // How workers prove they run for this job and user (gmcore/peer_auth.h):
  // with `munge` set (jobs under Slurm: GOLDMINER_AUTH=munge) a munge
  // credential each way, else the job secret (required then).
  std::string secret;
  auth::MungeAuth munge;
  std::string input;             // FORMAT:PATH[,PATH...]
  std::string program;           // worker program (TorchScript zip bytes); empty: batches as decoded
  uint32_t batch_size = kDefaultBatchSize;
  uint32_t shuffle_buffer = 0;   // within-split shuffle buffer (samples); 0: record order
  uint64_t seed = 0;
  // One delivery order, the same in every run with the same seed: splits
  // in the epoch's order (LeaseTable::epoch_order(), shuffled per epoch
  // as without it), each split's batches in sequence, whatever the
  // number of workers and threads and through worker loss. Batches that
  // come early wait for the earlier ones (SessionMetrics::held_batches).
  // Without it each split's batches are the same in every run too, but
  // batches of different splits interleave as workers finish them.
  bool deterministic = false;
  // False: the splits in input order every epoch (each epoch's order of
  // records is already shuffled: goldminer.DataLoader's sampler positions).
  bool shuffle_splits = true;
  uint64_t records_per_split = 0;  // 0: 16 batches per split
  uint64_t max_bad_records = 0;  // corrupt records allowed per epoch; 0: the first is an error
  // jpeg input: "full" (the default), "scale:S", "crop:S" or
  // "resized-crop:S" (readers::JpegDecode: DCT-scaled and crop-region
  // decode, the crop resized to S x S).
  std::string jpeg_decode = "full";
  // The queue's bound: batches queued plus those workers may still send
  // (their credits) stay within queue_batches, and within queue_bytes at
  // the recent batch size; each worker may always send one, so with more
  // workers than queue_batches the bound is one batch per worker.
  uint32_t queue_batches = 64;
  uint64_t queue_bytes = uint64_t{1} << 30;
  // Most batches one worker may have in flight; not in deterministic order,
  // where each worker may use its equal share of queue_batches (its
  // batches of later splits wait in the session for the awaited one).
  uint32_t credits_per_worker = 4;
  double lease_timeout_s = 30;   // a worker silent this long loses its splits
  // A split that fails on a worker through the worker's environment (its
  // Python process killed, say by the OOM killer; a read error of the OS:
  // Status::environment_error) is re-leased, to another worker while one
  // may take it, up to this many times an epoch; one failure more fails
  // the session, naming the split's file, records and first byte and each
  // failure's cause. 0: the first such failure fails it. Errors of the
  // input itself (a corrupt record beyond max_bad_records, the program's
  // own exception) fail the session at once, as every worker would fail.
  uint32_t split_retries = 3;
  double handshake_timeout_s = 10;
  // next() fails when no batch came within this many seconds (like a
  // DataLoader's `timeout`); 0: it waits as long as it takes (workers may
  // join later). The session goes on: a later next() may succeed.
  double timeout_s = 0;
  // The session fails for good when no data worker has joined this many
  // seconds after it opened (its companion job pending, never started, or
  // refused); the error says why when Slurm knows (GOLDMINER_DW_JOB's state
  // and reason, GOLDMINER_DW_ERROR). Meanwhile it logs that state every
  // minute. 0: wait as long as it takes.
  double first_worker_timeout_s = 1800;
  std::optional<LeasePosition> resume;  // from state(): continue that epoch exactly
  // Data-parallel training (DDP): this trainer is rank `rank` of
  // `world_size`, each with its own session over the same input, seed and
  // batch size. Each epoch every sample goes to exactly one rank and every
  // rank takes the same number of batches (gmcore/rank_share.h: a rank
  // short of batches gets some smaller ones); with drop_last, ranks leave
  // out what does not divide evenly instead, and with pad a rank a record
  // short reads another rank's first one again, as torch's
  // DistributedSampler(drop_last=True / False) does (not both).
  uint32_t rank = 0, world_size = 1;
  bool drop_last = false, pad = false;
  // Receive buffers (tw_lib/session/receive_memory.h): pinned for the GPU, so
  // that a host-to-device copy of a batch runs asynchronously (a build
  // --with-cuda and a GPU; without either a warning, and pageable), and
  // on the NUMA node nearest the trainer's GPU `cuda_device` (-1: the
  // current one): numa_node -1 auto, -2 the kernel's choice, N node N.
  bool pin_memory = false;
  int numa_node = -1;
  int cuda_device = -1;
  // The most bytes of received batches the trainer holds at once (in the
  // queue, in the consumer's hands, and cached buffers; pinned with
  // pin_memory): a worker's next large batch then waits until some are
  // dropped, and a batch larger than the whole budget drops its worker
  // (mpi_transport/transport.h, Options::receive_budget). At least 1 MiB.
  uint64_t receive_budget_bytes = uint64_t{8} << 30;
  // Where rank 0 listens (ucx://HOST:PORT; from_environment: the job's
  // GOLDMINER_LISTEN). With world_size > 1 the ranks then share the job's
  // workers: they connect to rank 0, which keeps some and sends each of
  // the others to the rank with the fewest (wire::Redirect) once every
  // rank has joined it; rank 0 listens there, every other rank on its own
  // address (`listen`, by default the interface toward rank 0 and any free
  // port) and joins rank 0; only rank 0 sizes the workers (elastic).
  // Empty: each rank's workers connect to it directly.
  std::string rank0;
  // Where this rank (not 0) listens when it shares rank 0's workers: the
  // port spank_goldminer.so reserved for it within the site's dw_ports
  // (GOLDMINER_RANK_LISTEN, set for each task of an srun step but rank 0's,
  // used when the rank is that task's SLURM_PROCID, not torchrun's RANK).
  // Empty: any free port on the interface toward rank 0. A caller that
  // sets another rank than from_environment() read clears it.
  std::string rank_listen;
  // The ports spank_goldminer.so reserved for UCX's own TCP transport (its
  // data connections) beside rank 0's `listen` (GOLDMINER_UCX_PORT) and
  // beside `rank_listen` (GOLDMINER_RANK_UCX_PORT), where the site's
  // firewall=nftables rules guard them; each used only while the session
  // listens at the address it belongs to. 0: an ephemeral port.
  int listen_ucx_port = 0;
  int rank_listen_ucx_port = 0;
  // When rank 0's (or the only rank's) `listen` port is taken (another
  // process bound it after spank_goldminer.so reserved it), the session
  // listens on any free port of the same address and calls this with its
  // address, to tell the job's workers and ranks where it is
  // (from_environment: the job's Comment, launch/trainer_rendezvous.h);
  // its error fails the session.
  // Unset: a taken port fails the session, naming it (a rank other than
  // 0 that shares rank 0's workers falls back all the same: it tells
  // rank 0 its address when it joins).
  std::function<Status(const std::string& address)> publish_listen;
  // A rank other than 0 that cannot join rank 0 at rank0: where rank 0
  // published that it listens instead ("" for nowhere), asked every 5 s.
  std::function<std::string()> published_rank0;
  // Data workers run as threads of this process (the worker loop of
  // goldminer-dw), in addition to any that connect.
  uint32_t local_workers = 0;
  uint32_t local_worker_threads = 1;
  dw::ProgramLoader program_loader;  // how local workers load `program` (goldminer/program_loader.h)
  // Elastic workers: with a launcher, every elastic.interval_s the session
  // measures its queue over the interval and grows or shrinks its workers
  // within elastic.config's bounds (goldminer/elastic.h); at its end it
  // stops those the launcher started. No launcher: the workers that come.
  ElasticSetup elastic;
  // The companion job of workers spank_goldminer.so submitted for the job
  // (GOLDMINER_DW_JOB; 0: none), or why it could not (GOLDMINER_DW_ERROR):
  // named when the session waits in vain for its workers.
  uint32_t companion_job = 0;
  std::string companion_job_error;
  // The goldminer-dw to start for workers on this node
  // (GOLDMINER_DW_PROGRAM; "": the one installed beside the suite).
  std::string dw_program;

  // Fills listen, secret or munge, and local_workers from the environment
  // that goldminer-run or spank_goldminer.so sets: GOLDMINER_LISTEN,
  // GOLDMINER_AUTH=munge and GOLDMINER_AUTH_JOB, or GOLDMINER_SECRET (or
  // GOLDMINER_SECRET_FILE), GOLDMINER_LOCAL_WORKERS, the reserved ports
  // and the companion job (launch/job_environment.h); rank and world_size
  // from RANK and WORLD_SIZE (torchrun) or else SLURM_PROCID and
  // SLURM_STEP_NUM_TASKS (a task of srun; not a batch script, which is
  // one process whatever --ntasks says, nor a heterogeneous job, whose
  // steps number the tasks of all their components); and `elastic` from the one
  // spank_goldminer.so gives a mode=elastic batch job
  // (elastic_from_environment). Unset ones are kept.
  Status from_environment();
  // Only rank and world_size, as from_environment() reads them.
  Status ranks_from_environment();
};

// One batch: tensors viewed in place in the received buffer (kept alive by
// `keepalive`), plus the identity of every sample.
struct SessionBatch {
  uint32_t epoch = 0;
  uint64_t split_id = 0;
  uint32_t sequence = 0;
  uint32_t samples = 0;
  std::vector<wire::TensorView> tensors;
  const int64_t* sample_ids = nullptr;  // samples x {file index, record index}
  std::shared_ptr<const void> keepalive;
};

struct WorkerMetrics {
  std::string id;         // as the worker introduced itself (host:pid)
  uint64_t batches = 0;
  uint64_t bytes = 0;
  double batches_per_s = 0;  // since it joined
  // It has asked for splits: its producers have started (a Python worker
  // starts its processes first, seconds each on shared cores).
  bool asked_for_splits = false;
  // Asked to drain (elastic shrink, Session::drain_workers): it finishes
  // the batch in hand, returns its leases and leaves.
  bool draining = false;
};

// What the scheduler's autosizer reads.
struct SessionMetrics {
  uint32_t epoch = 0;
  size_t queue_batches = 0;
  // deterministic: batches that came before those of earlier splits and
  // wait for them (not in queue_batches; in queue_bytes).
  size_t held_batches = 0;
  // The most batches queued and held at once this epoch (the queue's
  // bound, SessionOptions::queue_batches, in use).
  size_t max_queued_batches = 0;
  uint64_t queue_bytes = 0;
  // 0..1: queued batches over the room workers may use (queue_batches,
  // or credits_per_worker per worker where less and not deterministic;
  // held batches count), or queued bytes over
  // queue_bytes, whichever is more; 1: the workers wait for the trainer.
  double queue_fill = 0;
  double arrival_rate = 0;      // batches/s into the queue, this epoch
  double consumption_rate = 0;  // batches/s taken by the training loop, this epoch
  double trainer_wait_fraction = 0;  // of this epoch's wall time spent waiting in next()
  size_t workers = 0;           // authenticated and connected
  uint64_t workers_lost = 0;    // connections lost with splits in hand, since creation
  uint64_t workers_rejected = 0;  // failed authentication or sent garbage
  uint64_t bad_records = 0;     // skipped this epoch (max_bad_records budget)
  uint64_t duplicates_dropped = 0;  // re-run batches already delivered
  uint64_t splits_failed = 0;   // given back failed by workers and re-leased (split_retries), since creation
  // mode=elastic: the last scaling window, its seconds and the batches the
  // trainer took in it. A window lasts the interval and, while the trainer
  // waits less than half of it, until the trainer took 8 (a slow trainer's
  // rate is measured over batches, not over one or two), at most 12
  // intervals.
  double scaling_window_s = 0;
  uint64_t scaling_window_batches = 0;
  std::vector<WorkerMetrics> per_worker;
};

class Session {
 public:
  static Expected<std::unique_ptr<Session>> create(SessionOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The address workers connect to.
  std::string address() const;
  // Where batches are received: "pageable", "pinned, NUMA node 0 (nearest
  // GPU 0000:1b:00.0)", ...; and what of pin_memory/numa_node could not be
  // had, and why (also logged).
  std::string receive_memory() const;
  const std::vector<std::string>& receive_memory_warnings() const;
  // Records per file and in total (after the input was planned).
  uint64_t total_records() const;
  const std::vector<std::string>& files() const;
  const std::vector<uint64_t>& records_per_file() const;
  // Batches next() returns in an epoch (a DataLoader's len()): each split's
  // records cut into batch_size batches, a split's last one possibly
  // smaller. Fewer when corrupt records are skipped (max_bad_records): a
  // batch waits for batch_size good records, and a split of only corrupt
  // records gives none. With ranks: this rank's share of the current
  // epoch (the same on every rank; it may differ from epoch to epoch by
  // a split's batches, as the splits are dealt anew).
  uint64_t batches_per_epoch() const;
  // Records of this rank's share of the current epoch (total_records()
  // without ranks, fewer with drop_last).
  uint64_t records_per_epoch() const;

  // The next batch of the current epoch, waiting for it; nothing at the end
  // of the epoch (the next call starts the following epoch). An error is
  // final: a corrupt record, the bad-record budget exceeded, a program that
  // fails on a worker. The timeout's error is not final.
  Expected<std::optional<SessionBatch>> next();
  // As next(); while it waits it asks `interrupted` about every 100 ms
  // (without holding the session's lock) and, when that says true, returns
  // the error kInterrupted, which is not final either. How a caller with
  // its own signals (Python's Ctrl-C) stops a long wait.
  Expected<std::optional<SessionBatch>> next(const std::function<bool()>& interrupted);
  static const char* const kInterrupted;

  // The rest of the current epoch as a range of batches (an input
  // iterator over next()). An error ends the range; status() says which.
  class EpochRange {
   public:
    class iterator {
     public:
      using iterator_category = std::input_iterator_tag;
      using value_type = SessionBatch;
      using difference_type = std::ptrdiff_t;
      using pointer = const SessionBatch*;
      using reference = const SessionBatch&;
      const SessionBatch& operator*() const { return *current_; }
      const SessionBatch* operator->() const { return &*current_; }
      iterator& operator++() {
        advance();
        return *this;
      }
      bool operator==(const iterator& o) const { return current_.has_value() == o.current_.has_value(); }
      bool operator!=(const iterator& o) const { return !(*this == o); }

     private:
      friend class EpochRange;
      explicit iterator(Session* s) : session_(s) { advance(); }
      iterator() = default;
      void advance();
      Session* session_ = nullptr;
      std::optional<SessionBatch> current_;
    };
    iterator begin() { return iterator(session_); }
    iterator end() { return iterator(); }

   private:
    friend class Session;
    explicit EpochRange(Session* s) : session_(s) {}
    Session* session_;
  };
  EpochRange epoch() { return EpochRange(this); }
  // OK, or the error that ended the last epoch() range.
  const Status& status() const { return last_error_; }

  // The data position of what next() has returned so far; a session created
  // with it as `resume` returns exactly the rest of that epoch.
  LeasePosition state() const;

  SessionMetrics metrics() const;

  // Asks up to `n` workers to finish the batch in hand, return their leases
  // and exit (the autosizer shrinking the job). Returns how many were asked.
  size_t drain_workers(size_t n);

  // Waits until at least `n` workers are connected (metrics().workers), for
  // at most `timeout_s` seconds, asking `interrupted` about every 20 ms as
  // next() does. Returns how many are connected; else an error that says
  // how many joined in time (not final), kInterrupted, or the session's
  // failure. For a trainer that should not start before its workers: a
  // short job whose late workers would find it gone, a benchmark.
  Expected<size_t> wait_for_workers(size_t n, double timeout_s, const std::function<bool()>& interrupted = {});

 private:
  class Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  Status last_error_;
};

}  // namespace goldminer

#endif  // GOLDMINER_INCLUDE_SESSION_H_
