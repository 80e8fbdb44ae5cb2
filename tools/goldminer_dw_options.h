// goldminer-dw's options: one table for its parse, --help and the OPTIONS
// of goldminer-dw(1) (gmcore/command_line.h; man/gen_man.cc).
#ifndef GOLDMINER_TOOLS_GOLDMINER_DW_OPTIONS_H_
#define GOLDMINER_TOOLS_GOLDMINER_DW_OPTIONS_H_

#include <cstdint>
#include <string>

#include "dw_daemon/worker.h"
#include "gmcore/command_line.h"
#include "gmcore/wire.h"
#include "launch/admin_config.h"

namespace goldminer {

struct DwArgs {
  dw::WorkerOptions options;
  std::string secret_file, bind;
  int intra_op = 0;
  uint32_t trainer_job = 0;
  bool verbose = false;
  bool print_config = false;
};

// Which trainer the worker serves, how it proves itself and the cores it uses.
inline OptionTable dw_identity_rows(DwArgs* a) {
  dw::WorkerOptions& o = a->options;
  return {
        help_flag(),
        option("trainer", "ADDRESS", "", "the session's address: ucx://HOST:PORT, mpi:// or local://NAME (default: $GOLDMINER_TRAINER)", &o.trainer,
               R"(The address of the trainer's session: \fBucx://\fR\fIHOST\fR\fB:\fR\fIPORT\fR
(UCX, the usual transport),
\fBmpi://\fR (this process is a rank other than 0 of the trainer's
MPI_COMM_WORLD; rank 0 is the trainer), or \fBlocal://\fR\fINAME\fR (a session
in the same process, for tests: of no use to a separate
\fBgoldminer\-dw\fR process).
Without it, \fBGOLDMINER_TRAINER\fR; one of the two is required.
Rank 0 of a data-parallel job whose ranks share their workers may send
the worker, once authenticated, to another rank's session; the worker
then serves that one (it follows one such redirect).)"),
        option("secret-file", "FILE", "", "file holding the job secret, mode 0600 and owned by you (used when $GOLDMINER_SECRET is unset; default: $GOLDMINER_SECRET_FILE)", &a->secret_file,
               R"(File holding the job secret, read only when \fBGOLDMINER_SECRET\fR is not
set (set, it takes precedence even over this option).
\fIFILE\fR must be a regular file (not a symbolic link) owned by the
effective user, with no group or other permission bits (mode 0600 or
0400); trailing newlines and carriage returns are removed, and an empty
secret is an error.
The secret is never taken from the command line, where other users could
read it.
Without it, \fBGOLDMINER_SECRET_FILE\fR.)"),
        checked(option("threads", "N", "1", "splits read and processed in parallel", &o.threads,
                       R"(Splits read and processed in parallel (producer threads), 1 to 1024.)"),
                integer_in_range(1, kMaxDataWorkerThreads)),
        checked(option("intra-op-threads", "N", "0", "threads of one program call (0: the cores this worker may use over --threads, at least 1)", &a->intra_op,
                       R"(Threads of one call of the worker program (libtorch intra\-op threads), up
to 1024; 0: the cores this worker may use divided by \fB\-\-threads\fR, at
least 1.)"),
                integer_in_range(0, 1024)),
        checked(option("bind", "cores|none", "", "cores: bind each thread to a core of those this worker may use (its Slurm step's cpuset); none: leave them to the kernel (default: $GOLDMINER_DW_BIND, else cores)", &a->bind,
               R"(\fBcores\fR: bind each of the \fB\-\-threads\fR threads to one core of
those this worker may use (hwloc: its cpuset, under Slurm its step's
cgroup, within its CPU affinity), thread \fIi\fR to core \fIi\fR modulo
their number; \fBnone\fR: leave the threads to the kernel. With
\fB\-v\fR the worker says which cores it has.
Without it, \fBGOLDMINER_DW_BIND\fR, else \fBcores\fR.)"),
                one_of({"cores", "none"})),
        option("id", "NAME", "", "how this worker introduces itself (default HOST:PID)", &o.id,
               R"(How this worker introduces itself to the trainer, which names it so in its
messages and metrics.
Without it, \fINODE\fR\fB:\fR\fIPID\fR: the Slurm node name
(\fBSLURMD_NODENAME\fR) in a Slurm task, else this machine's host name, and
the process id.)"),
  };
}

// The worker's heartbeats and timeouts, its shared memory and its output.
inline OptionTable dw_timing_rows(DwArgs* a) {
  dw::WorkerOptions& o = a->options;
  return {
        checked(option("heartbeat", "S", "1", "seconds between heartbeats", &o.heartbeat_s,
               R"(Seconds between heartbeats.
The trainer drops a worker that holds splits and has not been heard from
within its lease timeout (\fBgoldminer\-consume \-\-lease\-timeout\fR, 30 s
by default) and leases those splits to other workers.)"),
                number_above(0)),
        checked(option("connect-timeout", "S", "30", "seconds to wait for the trainer", &o.connect_timeout_s,
               R"(Seconds to keep trying to reach the trainer, and to wait for its reader
configuration after authentication.)"),
                number_at_least(0)),
        option("trainer-job", "J", "", "the trainer's Slurm job id: while the trainer is out of reach, squeue is asked every 30 s and the worker exits 0 once that job has ended (companion jobs get it)", &a->trainer_job,
               R"(The trainer's Slurm job id. While the trainer is out of reach (before its
session listens), \fBsqueue\fR is asked at the first failed attempt and
then every 30 s; once job \fIJ\fR has ended (completed, cancelled, failed,
NODE_FAIL, ..., or no longer known to Slurm) the worker exits 0 with that
reason instead of retrying until \fB\-\-connect\-timeout\fR. When squeue
cannot be run or the controller does not answer, the worker goes on
retrying. The companion jobs of \fBspank_goldminer\fR(8) pass it.)"),
        checked(option("rediscover-timeout", "S", "120", "with --trainer-job: seconds to look for the address the trainer published after a process at its address did not prove the job", &o.rediscover_timeout_s,
               R"(With \fB\-\-trainer\-job\fR: how long the worker looks for the address its
trainer published after the process at \fB\-\-trainer\fR's address did not
prove the job (another user's process holding the port the trainer was
to listen on). A trainer whose reserved port was taken listens on
another and writes
\fBgoldminer\-trainer=ucx://\fR\fIHOST\fR\fB:\fR\fIPORT\fR into its job's Comment
(which only the job's owner and Slurm's operators may change); the worker
reads it with \fBsqueue \-o %k\fR every second once a process at the
trainer's address answered without proving the job, and every 30 s while
nothing answers there, and goes to the address it finds. Not found within \fIS\fR seconds, the worker exits 1 naming the
process's failed proof. The trainer at the new address proves the job as
any other.)"),
                number_at_least(0)),
        checked(option("trainer-timeout", "S", "60", "seconds of silence from a connected trainer after which it is taken as gone (the session sends a heartbeat every second)", &o.trainer_timeout_s,
               R"(Seconds of silence from a connected trainer after which the worker takes
it as gone and exits 1; at least 2, two of the session's heartbeats. A
trainer that takes no batch for a while still sends heartbeats: only a
stopped process or a lost node stays silent.)"),
                number_at_least(2 * wire::kSessionHeartbeatS)),
        checked(option("drain-timeout", "S", "30", "seconds a drain waits to send batches already made", &o.drain_timeout_s,
               R"(Seconds a drain waits for credits to send the batches already made and to
return the splits in hand (see \fBSIGNALS\fR).
When it runs out, the worker logs
"drain timed out; leaving \fIN\fR splits to be re\-leased", closes the
connection and exits 0; the trainer leases those splits again.)"),
                number_at_least(0)),
        checked(option("shm-mb", "N", "256", "MiB of shared memory for batches to a trainer on this node (ucx; 0: none)", &o.shm_mb,
               R"(MiB of shared memory (a sealed memfd) for batches to a trainer on the same
node, over \fBucx://\fR.
The worker builds each batch of 64 KiB or more in a free block of it (the
batch's only copy) and sends the trainer only the block's place; the
trainer maps the memory once (through \fB/proc/\fIPID\fB/fd\fR, so both must run as the same user) and
hands the block to the training program without copying it.
The block is reused once the training program drops the batch.
A batch that finds no free block, and every batch to a trainer on another
node or one that cannot map the memory, is sent by copy instead.
Pages are touched only as batches use them.
0: always send by copy.
"Same node" means the same kernel (boot id): a trainer in another network
namespace of this machine (a container with its own network,
\fBgoldminer\-devcluster\fR(1)'s nodes) maps the memory too.
UCX's own shared\-memory transports cannot reach such a trainer, so the
worker then sends on its connection endpoint (TCP, and cma for large
copies); \fB\-v\fR says so.)"),
                integer_in_range(0, 65536)),
        flag("print-config", "print each setting this worker would run with and where it came from, then exit",
             &a->print_config,
             R"(Print each setting this worker would run with, one per line, and exit 0
without connecting: each option as \fB\-\-\fIKEY\fB=\fIVALUE\fR followed by
where it came from (\fB# command line\fR or \fB# default\fR), then each
variable of \fBENVIRONMENT VARIABLES\fR as \fINAME\fB=\fIVALUE\fR
\fB# environment\fR, or \fB# \fINAME\fB unset\fR (the secret's value is never
printed, only its length). A value the worker would refuse is an error
(exit 2) as it is without this option.)"),
        flag("verbose,v", "log every connection event", &a->verbose,
             R"(Also print progress messages (the start of a drain) and, at the end, a
summary:
"goldminer\-dw: \fIID\fR: sent \fIN\fR batches, finished \fIN\fR splits,
returned \fIN\fR, failed \fIN\fR; \fIN\fR frames through shared memory, \fIN\fR built there
(\fISTATE\fR))"),
  };
}

inline CommandOptions dw_command(DwArgs* a) {
  OptionTable rows = joined_rows({dw_identity_rows(a), dw_timing_rows(a)});
  return {"goldminer-dw",
          "goldminer-dw [--trainer ADDRESS] [options]",
          "A GoldMiner data worker: leases input splits from a trainer session, reads, decodes,\n"
          "runs the worker program and streams batches back; see goldminer-dw(1).",
          std::move(rows),
          {}};
}

}  // namespace goldminer

#endif  // GOLDMINER_TOOLS_GOLDMINER_DW_OPTIONS_H_
