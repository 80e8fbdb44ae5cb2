// goldminer-consume's options: one table for its parse, --help and the
// OPTIONS of goldminer-consume(1) (gmcore/command_line.h; man/gen_man.cc).
#ifndef GOLDMINER_TOOLS_GOLDMINER_CONSUME_OPTIONS_H_
#define GOLDMINER_TOOLS_GOLDMINER_CONSUME_OPTIONS_H_

#include <cstdint>
#include <string>

#include "gmcore/command_line.h"
#include "goldminer/session.h"
#include "launch/admin_config.h"
#include "tw_lib/session/session_option_docs.h"

namespace goldminer {

struct ConsumeArgs {
  SessionOptions session;
  std::string input, program_path, transport, listen, state_out, resume, rank0, numa_node;
  uint32_t epochs = 1, workers = 1, threads = 1, min_workers = 0, join_timeout = 60;
  uint64_t stop_after = 0, receive_budget_mb = 8192;
  bool json = false, verbose = false;
  int64_t rank = -1, world_size = -1;  // -1: from the environment, else 0 of 1
};

// A row whose name, default and help goldminer.Session shares
// (tw_lib/session/session_option_docs.h); the man text is this command's.
template <class T>
OptionSpec shared_option(const std::string& name, T* target, std::string man) {
  const SharedSessionOption& r = shared_session_option(name);
  return option(r.option, r.value_doc, r.default_value, r.help, target, std::move(man));
}
inline OptionSpec shared_flag(const std::string& name, bool* target, std::string man) {
  const SharedSessionOption& r = shared_session_option(name);
  return flag(r.option, r.help, target, std::move(man));
}

// What goldminer-consume reads, and the workers that read it.
inline OptionTable consume_input_rows(ConsumeArgs* a) {
  SessionOptions& o = a->session;
  return {
        help_flag(),
        required_option("input", "FORMAT:PATH[,PATH...]", "FORMAT:PATH[,PATH...], FORMAT one of criteo-tsv, csv, tfrecord, jpeg, text", &a->input,
                        R"(The input; \fIFORMAT\fR is one of \fBcriteo\-tsv\fR,
\fBcsv\fR, \fBtfrecord\fR, \fBjpeg\fR, \fBtext\fR (see
\fBINPUT FORMATS\fR).
An unknown format, an unreadable file or an input without records is an
error (exit 1).)"),
        option("program", "FILE", "", "worker program (TorchScript .pt) run on every batch; default: send the decoded batches", &a->program_path,
               R"(Worker program, a TorchScript file (\fB.pt\fR), sent to every worker and
run on every batch (for example the data\-worker half made by
\fBgoldminer\-split\fR(1)).
A file that cannot be read is a usage error; a file that is not a
TorchScript module, or workers built without libtorch, make the workers
exit (see \fBNOTES\fR).
Without it, workers send the decoded batches.)"),
        checked(shared_option("batch-size", &o.batch_size,
               R"(Samples per batch, at least 1 (the last batch of a split may be smaller).)"),
                integer_in_range(1, 1 << 24)),
        checked(option("epochs", "E", "1", "epochs to consume", &a->epochs,
               R"(Epochs to consume, at least 1.
With \fB\-\-resume\fR the first is the rest of the resumed epoch.)"),
                integer_in_range(1, 1000000)),
        checked(option("workers", "N", "1", "local data workers to start (0: only --listen)", &a->workers,
               R"(Data workers to start (see \fBTRANSPORTS\fR); 0 starts none, and only
workers that connect to \fB\-\-listen\fR by themselves feed the session.)"),
                integer_in_range(0, 1024)),
        checked(option("threads", "T", "1", "threads per data worker", &a->threads,
               R"(Threads per data worker (\fBgoldminer\-dw \-\-threads\fR), 1 to 1024.)"),
                integer_in_range(1, kMaxDataWorkerThreads)),
        checked(option("min-workers", "N", "0", "take no batch before this many workers have joined", &a->min_workers,
               R"(Take no batch, and start timing the first epoch, only once \fIN\fR workers
are connected: the workers this run starts and those that connect to
\fB\-\-listen\fR alike.
Workers that join late may otherwise find the run over (their connection is
then refused and they exit 1), and a benchmark would time fewer workers
than it asked for.
0: do not wait.)"),
                integer_in_range(0, 4096)),
        checked(option("join-timeout", "S", "60", "seconds --min-workers waits before it is an error", &a->join_timeout,
               R"(How long \fB\-\-min\-workers\fR waits; then the run ends with exit
status 1, naming how many workers joined.)"),
                integer_in_range(1, 86400)),
        checked(option("transport", "ucx|mpi|local", "ucx", "ucx | mpi | local", &a->transport,
               R"(How workers and trainer talk (see \fBTRANSPORTS\fR).)"),
                one_of({"ucx", "mpi", "local"})),
        option("listen", "ADDRESS", "", "address to listen on for external workers (ucx://HOST:PORT; default $GOLDMINER_LISTEN, which a --goldminer batch job has, else ucx://127.0.0.1:0)", &a->listen,
               R"(Where the session listens for workers with \fB\-\-transport ucx\fR:
\fBucx://\fR\fIHOST\fR\fB:\fR\fIPORT\fR, or \fIHOST\fR\fB:\fR\fIPORT\fR;
port 0 takes a free port, shown in the "listening on" line.
Ignored with the other transports.
Without it, \fBGOLDMINER_LISTEN\fR when it is set (a \fBsbatch \-\-goldminer\fR
batch job has it: its data workers connect there), else
\fBucx://127.0.0.1:0\fR.)"),
        option("seed", "S", "0", "seed of the split order, shuffle buffer and transforms", &o.seed,
               R"(Seed of the split order, the shuffle buffers and the seeds handed to the
worker program.
The same seed gives the same batches.)"),
        checked(shared_option("shuffle-buffer", &o.shuffle_buffer,
               R"(Samples of the streaming shuffle buffer within each split; 0 or 1 keeps
record order.)"),
                integer_in_range(0, 1 << 26)),
        flag("deterministic", "one batch order, the same every run: splits in the epoch's seeded order, each in sequence", &o.deterministic,
             R"(One batch order, the same in every run with the same input, options and
\fB\-\-seed\fR, whatever the number of workers and threads, and through
workers lost, joining or drained: the splits in the epoch's order (shuffled
per epoch with \fB\-\-seed\fR, as without this option), each split's
batches in sequence.
Batches that come before those of an earlier split wait in the session for
them (within the queue's bound, \fB\-\-queue\-batches\fR, shared equally by
the workers); the workers start and send first the split they hold that
comes first in that order.
Every split's batches and their contents are the same in every run either
way (seeded); without this option batches of different splits are taken
in the order workers finish them.
\fBorder_digest\fR (below) shows the order.)"),
        shared_option("records-per-split", &o.records_per_split,
               R"(Consecutive records per split, the unit a worker leases; 0: 16 batches
(16 x \fB\-\-batch\-size\fR).)"),
        shared_option("max-bad-records", &o.max_bad_records,
               R"(Corrupt records that may be skipped per epoch; each is counted
(\fBbad_records\fR) and not reported as missing.
The session fails (exit 1) when an epoch's count exceeds \fIN\fR; with 0
the first corrupt record is an error.
I/O errors and files changed since the plan are always errors.)"),
        option("jpeg-decode", "full|scale:S|crop:S|resized-crop:S", "full", "jpeg input: full, scale:S (DCT-scaled, shorter side >= S), crop:S (RandomResizedCrop box only) or resized-crop:S (that box resized to S x S)", &o.jpeg_decode,
               R"(How jpeg input is decoded.
\fBscale:\fR\fIS\fR: libjpeg-turbo decodes at 1/2, 1/4 or 1/8 size in the DCT,
the smallest that keeps the shorter side at least \fIS\fR (as PIL's draft mode).
\fBcrop:\fR\fIS\fR: per image a crop box drawn as torchvision's
RandomResizedCrop(\fIS\fR) draws it, from the seed and the record, and only
that region decoded (DCT-scaled while its shorter side stays at least \fIS\fR);
the image is the crop, which the program resizes.
\fBresized\-crop:\fR\fIS\fR: the same crop, then resized to \fIS\fRx\fIS\fR
in the reader (bilinear, sampled as torch's \fBinterpolate\fR without
antialias): RandomResizedCrop(\fIS\fR) whole, every image of a batch the same
size, the program left only per-pixel work such as normalization;
\fIS\fR at most 8192.
All three change pixels a little (PSNR in readers/README.md); a different value
is a different plan for \fB\-\-resume\fR.)"),
  };
}

// Data-parallel ranks and the batches' ends.
inline OptionTable consume_rank_rows(ConsumeArgs* a) {
  SessionOptions& o = a->session;
  return {
        option("rank", "R", "", "this trainer's data-parallel rank (default: $RANK, else $SLURM_PROCID in an srun step, else 0)", &a->rank,
               R"(Data-parallel training: this program is rank \fIR\fR of \fIW\fR, each a
\fBgoldminer\-consume\fR (with its own workers or \fB\-\-listen\fR address)
over the same input, seed, batch size and \fB\-\-records\-per\-split\fR.
Each epoch the ranks read every sample once between them and each takes
the same number of batches: the splits, in the epoch's seeded order, are
laid end to end and cut into \fIW\fR ranges of equal records, so a split
may be read in part by two ranks; a rank that would have fewer batches
than another cuts some of its parts into more, smaller batches (full
batches first). Every rank computes the same deal from the seed and the
epoch alone: no rank or worker coordinates it. An error (exit 1) when a
rank has fewer records than the batches it would need (batch size 1, or
about as many ranks as records): use \fB\-\-drop\-last\fR.
\fB\-\-rank\fR must be below \fB\-\-world\-size\fR (exit 2).
Without it, \fBRANK\fR (as \fBtorchrun\fR sets it), else \fBSLURM_PROCID\fR (a task of
\fBsrun\fR), else 0.)"),
        option("world-size", "W", "", "data-parallel ranks, each a goldminer-consume with the same input, seed and batch size (default: $WORLD_SIZE, else $SLURM_STEP_NUM_TASKS in an srun step, else 1)", &a->world_size,
               R"(The number of data\-parallel ranks (see \fB\-\-rank\fR).
Without it, \fBWORLD_SIZE\fR (as \fBtorchrun\fR sets it), else
\fBSLURM_STEP_NUM_TASKS\fR (a task of \fBsrun\fR), else 1.)"),
        option("rank0", "ADDRESS", "", "with ranks: where rank 0 listens (ucx://HOST:PORT); the ranks then share the workers that connect there: rank 0 listens there and sends some to the other ranks, which listen on addresses of their own (default: $GOLDMINER_LISTEN, as in a --goldminer job)", &a->rank0,
               R"(With ranks: where rank 0 listens (\fBucx://\fR\fIHOST\fR:\fIPORT\fR). The
ranks then share the workers that connect there: rank 0 listens at
\fIADDRESS\fR, every other rank on an address of its own (the interface
toward rank 0, any free port; \fB\-\-listen\fR overrides) and joins rank
0, which, once every rank has joined, keeps some workers and sends each of
the others to the rank with the fewest. Without it, \fBGOLDMINER_LISTEN\fR
(in a \fBsbatch \-\-goldminer\fR job, whose \fBsrun\fR ranks so share
the companion job's workers). Without it each rank needs workers of its
own (\fB\-\-workers\fR, or its own \fB\-\-listen\fR address).)"),
        shared_flag("pad", &o.pad,
             R"(With ranks: every rank reads as many records. The \fIk\fR-th rank with a
record fewer than the others also reads record \fIk\fR of the first split
(in the epoch's order) it does not read otherwise, as
\fBDistributedSampler(drop_last=False)\fR repeats the first indices; that
record is then received by two ranks. Not with \fB\-\-drop\-last\fR
(exit 1). An error (exit 1) when a rank reads a part of every split.)"),
        shared_flag("drop-last", &o.drop_last,
             R"(With ranks: every rank takes as many batches as the rank with the fewest,
and the others leave out their last parts' last batches, as
\fBDistributedSampler(drop_last=True)\fR leaves out the tail that does
not divide evenly. The records left out are neither received nor
counted as missing.)"),
  };
}

// The session's limits, restarts, receive memory and the output.
inline OptionTable consume_limit_rows(ConsumeArgs* a) {
  SessionOptions& o = a->session;
  return {
        checked(shared_option("queue-batches", &o.queue_batches,
               R"(Bound of the session's queue of received batches.
Workers get a credit back for a consumed batch only while the queue holds
fewer than \fIN\fR batches and at most 1 GiB.)"),
                integer_in_range(1, 1000000)),
        option("lease-timeout", "S", "30", "seconds", &o.lease_timeout_s,
               R"(Seconds a worker may stay silent (no heartbeat, request or batch) before
it is dropped and its splits are leased to others.)"),
        shared_option("split-retries", &o.split_retries,
               R"(Times a split that failed on a worker through the worker's environment
(its Python dataset process killed, say by the OOM killer; a read error of
the operating system) is leased again in an epoch, to another worker while
one it has not failed on is connected; one failure more ends the run
(exit 1) with an error naming the split's file, records and first byte and
each failure's worker and cause. A corrupt record (beyond
\fB\-\-max\-bad\-records\fR) or the program's own error ends it at once.)"),
        checked(option("first-worker-timeout", "S", "1800", "seconds after which the run fails when no data worker has joined (0: wait as long as it takes)", &o.first_worker_timeout_s,
               R"(Seconds after which the run fails (exit 1) when no data worker has joined
at all, for example because the job's companion job stays pending; in a
\fB\-\-goldminer\fR job the error, and a log line every minute before
it, say where that job stands as \fBsqueue\fR tells it (state and reason).
0 waits as long as it takes.)"),
                number_at_least(0)),
        option("stop-after-batches", "N", "0", "stop after this many batches, write --state-out and exit 3 (restart tests)", &a->stop_after,
               R"(After the \fIN\fRth batch of this run (counted over all epochs), write the
data position to \fB\-\-state\-out\fR and exit 3, without printing the
unfinished epoch: for restart tests.
Needs \fB\-\-state\-out\fR.
0: never.)"),
        option("state-out", "FILE", "", "where --stop-after-batches writes the data position", &a->state_out,
               R"(Where \fB\-\-stop\-after\-batches\fR writes the data position (see
\fBSTATE FILE\fR).)"),
        option("resume", "FILE", "", "continue from a --state-out file", &a->resume,
               R"(Continue from a \fB\-\-state\-out\fR file: the session delivers exactly the
rest of that epoch, and the check of that epoch counts the samples listed
in the file as already seen.
Use the same \fB\-\-input\fR, \fB\-\-seed\fR, \fB\-\-batch\-size\fR,
\fB\-\-records\-per\-split\fR and \fB\-\-deterministic\fR as the run that
wrote it; the seed and the input plan (files, split ranges, batch size)
are checked (exit 1 when either differs).
A file that cannot be read or parsed is a usage error.)"),
        flag("pin-memory", "receive batches into pinned memory (registered with CUDA; needs a build --with-cuda and a GPU, else a warning and pageable memory)", &o.pin_memory,
             R"(Receive batches into pinned memory: page\-locked and registered with CUDA,
so that a copy to a GPU reads them asynchronously (see
\fBreceive_memory\fR). Needs a build \fB\-\-with\-cuda\fR and a GPU; without
either a warning says which on standard error and the memory stays
pageable. Frames of a worker on this node then come by copy, not through
its shared\-memory arena.)"),
        option("numa-node", "NODE", "auto", "NUMA node of the receive buffers: auto (the one nearest the GPU, when there is one), none (the kernel's choice) or a node's number", &a->numa_node,
               R"(NUMA node of the receive buffers: \fBauto\fR (the node nearest the GPU,
found through CUDA and hwloc, when there is one; else the kernel's
choice), \fBnone\fR (the kernel's choice) or a node's number (an error
naming the machine's nodes if there is no such node).)"),
        checked(option("receive-budget-mb", "MIB", "8192", "the most MiB of received batches held at once; a worker's next large batch waits for room", &a->receive_budget_mb,
               R"(The most MiB of received batches the trainer holds at once: those in its
queue and in the consumer's hands, and free buffers it keeps for reuse
(pinned ones with \fB\-\-pin\-memory\fR). A worker's next large batch
(sent by rendezvous) waits, unsent, until some are dropped; nothing is lost,
and the worker's send timeout still applies. A batch larger than the whole
budget drops its worker with that reason. Batches in a worker's
shared\-memory arena are the worker's memory and not counted.
Keep it well above what the session holds by design (\fB\-\-queue\-batches\fR
batches, and in deterministic order the batches it holds back): a budget
below that stalls workers until their send timeout.
Peers that have not authenticated are held apart, to a few small frames
each. 1 to 1073741824.
8192 MiB is 8 GiB.)"),
                integer_in_range(1, 1073741824)),
        flag("json", "print one JSON object per epoch", &a->json,
             R"(Print one JSON object per epoch instead of a line of text (see
\fBOUTPUT\fR).)"),
        flag("verbose,v", "log worker joins and losses", &a->verbose,
             R"(Also print the session's progress messages on standard error: workers
joining ("goldminer: session: worker \fIID\fR joined"), leaving or dropped,
and splits leased again.)"),
  };
}

inline CommandOptions consume_command(ConsumeArgs* a) {
  OptionTable rows = joined_rows({consume_input_rows(a), consume_rank_rows(a), consume_limit_rows(a)});
  return {"goldminer-consume",
          "goldminer-consume --input FORMAT:PATH[,PATH...] [options]",
          "A trainer with no model: streams the input from data workers and checks that every\n"
          "sample arrives exactly once per epoch; see goldminer-consume(1).",
          std::move(rows),
          {}};
}

}  // namespace goldminer

#endif  // GOLDMINER_TOOLS_GOLDMINER_CONSUME_OPTIONS_H_
