// The docstring of goldminer._session (goldminer.Session's options and
// use), kept apart from the binding code in python_session.cc, its only
// includer: kModuleDoc, the signature, kModuleDocKeywords, then the keywords
// goldminer-consume shares (session_keyword_docs()), then kModuleDocRest.
#ifndef GOLDMINER_TW_LIB_PYTHON_SESSION_DOC_H_
#define GOLDMINER_TW_LIB_PYTHON_SESSION_DOC_H_

namespace goldminer::python_session_doc {

inline constexpr const char kModuleDoc[] = R"doc(GoldMiner trainer session: batches from data workers as torch tensors.

    import goldminer
    with goldminer.Session("criteo-tsv:/data/day_0,/data/day_1", batch_size=4096,
                           program=worker_module, workers=4) as session:
        for epoch in range(3):
            for label, dense, sparse in session:   # one epoch per `for`
                ...

)doc";

// After the signature (written from SessionOptions' defaults by
// python_session.cc), the keywords.
inline constexpr const char kModuleDocKeywords[] = R"doc(

  input            "FORMAT:PATH[,PATH...]", FORMAT one of criteo-tsv, csv, tfrecord, jpeg, text,
                   or "index:N" (the integers 0 .. N-1: goldminer.DataLoader's positions).
  program          the worker program run on every batch by the workers: None (the
                   batches as the reader decodes them), a torch.jit.ScriptModule, the
                   bytes of a saved one, or the path of a TorchScript .pt file. It runs
                   with goldminer-dw's libtorch (LIBTORCH_VERSION) where that is this
                   torch's version, else (and always on "local" workers) with this
                   Python and torch, in a Python process of each worker.
  workers          data workers this session starts and stops itself. transport "ucx":
                   N goldminer-dw processes ($GOLDMINER_DW_PROGRAM, else the goldminer-dw
                   installed or built beside this package, else PATH), each with
                   `threads` threads, connecting to `address`; transport "local": N
                   worker threads inside this process (`threads` threads each).
  transport        "ucx" or "local" (what `workers` starts; see above).
  listen           address workers connect to: ucx://HOST:PORT (PORT 0: any free one,
                   HOST:PORT alone means ucx://HOST:PORT), local://NAME, mpi://.
                   Default: $GOLDMINER_LISTEN, else ucx://127.0.0.1:0 ("ucx") or a
                   fresh local://NAME ("local").
  seed             seed of the split order, the shuffle buffer and the programs' random
                   ops. Default: the resume position's seed, else 0.
  deterministic    one batch order, the same in every run with the same seed: splits in
                   the epoch's shuffled order, each split's batches in sequence, whatever
                   the workers (batches that come early wait for earlier ones). Without
                   it, batches of different splits interleave as workers finish them.
  shuffle_splits   False: the splits in input order every epoch, not shuffled by the seed
                   (goldminer.DataLoader: its sampler orders the records).
  jpeg_decode      jpeg input: "full", "scale:S" (DCT-scaled decode, shorter side >= S),
                   "crop:S" (only a RandomResizedCrop box, DCT-scaled while >= S) or
                   "resized-crop:S" (that box resized to S x S: RandomResizedCrop whole): see
                   goldminer-consume(1) --jpeg-decode and readers/README.md (PSNR).
  timeout          seconds a step of iteration waits for a batch before it raises
                   RuntimeError (as a DataLoader's timeout); 0 waits as long as it
                   takes (workers may join later). The session goes on after it.
  first_worker_timeout
                   seconds after which the session fails for good when no data worker
                   has joined (its companion job pending or refused: the error says
                   which, from squeue); meanwhile it logs that every minute. 0 waits
                   as long as it takes.
  resume           a dict from state(): continue exactly from that position.
  rank, world_size data-parallel training (DDP): this process is rank `rank` of `world_size`,
                   each with its own session over the same input, seed and batch size.
                   Each epoch every sample goes to exactly one rank and every rank gets
                   the same number of batches (a rank short of batches gets some smaller
                   ones). Default: $RANK and $WORLD_SIZE (torchrun), else $SLURM_PROCID
                   and $SLURM_STEP_NUM_TASKS (a task of srun, not in a heterogeneous
                   job), else 0 of 1.
  pin_memory       receive batches into pinned memory (page-locked, registered with CUDA),
                   so that copying one to the GPU runs asynchronously, with no extra host
                   copy. Needs a build --with-cuda and a GPU; without either a
                   RuntimeWarning (receive_memory_warnings) says which, and memory stays
                   pageable. goldminer.Session(device="cuda") also hands batches over as
                   CUDA tensors, copied on a side stream ahead of next() (goldminer/session.py).
  numa_node        NUMA node of the receive buffers: None (default) the node nearest the
                   GPU cuda_device (-1: the current one) where there is one, else the
                   kernel's choice; N: node N (an error if there is none).
  secret           the job secret workers must prove. Default: $GOLDMINER_SECRET (or
                   $GOLDMINER_SECRET_FILE), else a fresh random one (handed to the
                   workers this session starts). Unused under `sbatch --goldminer`,
                   whose GOLDMINER_AUTH=munge has the session and its workers prove
                   user and job to each other with munge instead.
)doc";

// The rest, after the keywords goldminer-consume shares
// (tw_lib/session/session_option_docs.h).
inline constexpr const char kModuleDocRest[] = R"doc(
The environment is read first (GOLDMINER_LISTEN, GOLDMINER_AUTH[_JOB], GOLDMINER_SECRET[_FILE],
GOLDMINER_LOCAL_WORKERS, as goldminer-run(1) and the SPANK plugin set them); the
keyword arguments given override it. GOLDMINER_LOCAL_WORKERS=N adds N in-process
workers unless transport="local" with workers > 0 says how many.
In an `sbatch --goldminer` job with mode=elastic (the default), the session also
grows its companion workers towards dw-max while iteration waits for batches, and
drains them while its queue stays full (spank_goldminer(8)).

Iteration: `for batch in session` yields the batches of ONE epoch and stops at its
end (like a torch DataLoader); the next `for` runs the next epoch. A `for` left with
`break` goes on where it stopped. Every sample arrives exactly once per epoch, in an
order that depends on the seed and on which worker is faster. Each batch is a tuple
of torch CPU tensors, in the reader's order (readers/README.md: text -> (data uint8
[sum of lengths], lengths int64 [B]); criteo-tsv -> (label float32 [B], dense float32
[B,13], sparse int64 [B,26]); ...) or the program's outputs. The tensors are views
into the received buffer, not copies, each 64-byte aligned; the buffer stays valid
for as long as any tensor of its batch is referenced (also after the session moved
on or was closed); writing to them changes only that batch.
`session.last_sample_ids` is an int64 tensor [B, 2] of (file index, record index) for
each sample of the last batch (a view into the same buffer); file indexes follow
`session.files`. (goldminer._session.Session itself, which links no libtorch, hands
out DLPack capsules, a bool tensor as int8; goldminer.Session makes them tensors.)

Methods and attributes:
  state()          {"epoch", "seed", "plan", "bad_records", "done": [split ids], "partial":
                   [[split id, batches]]}: the position of what iteration returned so far; plain data
                   (JSON-able). "plan" fingerprints the input's splits, batch size and
                   shuffle buffer: a session with other ones refuses the position.
  metrics()        dict of the session's counters (epoch, queue_batches, held_batches, queue_bytes,
                   queue_fill, arrival_rate, consumption_rate, trainer_wait_fraction,
                   workers, workers_lost, workers_rejected, bad_records,
                   duplicates_dropped, splits_failed, scaling_window_s and
                   scaling_window_batches (elastic: the last scaling window), per_worker:
                   [{id, batches, bytes, batches_per_s, asked_for_splits, draining}]).
  drain_workers(n) asks up to n workers to finish their batch and leave; returns how many.
  wait_for_workers(n, timeout=60)
                   waits until n workers are connected and returns how many are; raises
                   RuntimeError naming how many joined when timeout s passed first (the
                   session goes on). For a trainer that should not start before its
                   workers (under Slurm: examples/dataplane-job.sh).
  address          where workers connect (give it to goldminer-dw as GOLDMINER_TRAINER).
  total_records, files, records_per_file, worker_pids (the goldminer-dw this session started).
  len(session)     batches per epoch, as a DataLoader's len(): each split's records cut into
                   batch_size batches (a split's last one may be smaller); fewer when
                   corrupt records are skipped (max_bad_records). With ranks: this rank's
                   batches in the current epoch, the same on every rank.
  rank, world_size, records_per_epoch (this rank's records in the current epoch).
  last_batch       (epoch, split id, sequence) of the last batch.
  receive_memory   where batches are received: "pageable", "pinned, NUMA node 0 (nearest GPU
                   0000:00:06.0)", ...; receive_memory_warnings: what of pin_memory/numa_node
                   could not be had, and why.
  close()          ends the session and stops the workers it started (SIGTERM while the
                   session still answers, then waits; SIGKILL after 10 s); also on `with`
                   exit and when the object is collected. Later calls raise RuntimeError.

Module attributes: __version__ (the package's), LIBTORCH_VERSION (the libtorch version
goldminer-dw was built with, "" for none).

Errors: a bad argument raises ValueError or TypeError; a session that cannot start
(missing or unreadable input, no goldminer-dw) and a failed epoch (a corrupt record,
a program that fails on a worker) raise RuntimeError with the cause, file included.
A failed session stays failed. The iteration blocks (without the GIL) until a batch
comes: with no worker connected it waits for one; Ctrl-C (any signal whose Python
handler raises) ends the wait within about 0.1 s with KeyboardInterrupt, and the
session goes on. If every goldminer-dw the session started exits before any joined
(and nothing else can deliver: no in-process worker, no listen address given), the
first batch raises RuntimeError with their exit statuses instead of waiting, unless
all exited with status 1, which is also how a worker that reported its error to the
session ends: then that error is raised, or, for workers that could not reach the
session, the iteration waits (their stderr says why). Workers joining and
leaving are logged on stderr. Use a session from one thread.
)doc";

}  // namespace goldminer::python_session_doc

#endif  // GOLDMINER_TW_LIB_PYTHON_SESSION_DOC_H_
