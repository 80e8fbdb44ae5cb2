// goldminer-dw: the CPU-only data-worker daemon (see goldminer-dw(1)).
// Connects to a trainer session, proves its job (munge or the job secret), then streams
// batches until drained. SIGTERM/SIGINT: finish the batch in hand, return
// the leases, exit 0 (Slurm preemption sends SIGTERM first).
#include <malloc.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "dw_daemon/cpu_binding.h"
#include "dw_daemon/python_program.h"
#include "dw_daemon/worker.h"
#include "gmcore/log.h"
#include "gmcore/peer_auth.h"
#include "launch/job_environment.h"
#include "launch/slurm_cli.h"
#include "launch/trainer_rendezvous.h"
#include "gmcore/wire.h"
#include "tools/goldminer_dw_options.h"

using namespace goldminer;

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop = true; }

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "goldminer-dw: %s\n", message.c_str());
  return code;
}

// Every batch allocates and frees buffers of megabytes (the reader's
// tensors, the program's intermediates and outputs). With glibc's
// defaults they go back to the kernel after each batch (munmap, or a
// trimmed heap), and the next batch pays the page faults and the
// kernel's zeroing again. Keep them in the heap instead: allocations up
// to 32 MiB (glibc's limit) come from it, and it is trimmed only above
// 1 GiB of free memory at its top. Measured on the JPEG benchmark (268
// images, batches of 32 x 602 KB, median of 3): the worker's minor
// faults per epoch after the first ~15,000 -> ~0, its CPU per epoch
// 0.82 -> 0.53 s.
// One arena for every thread: a producer thread's own arena is made of
// 64 MiB heaps, and glibc unmaps a heap as soon as it is empty whatever
// the trim threshold, so a batch's buffers were faulted in afresh every
// time they spilled into a new heap (session 6, same benchmark, 2
// alternating runs each: ~28,000 minor faults per epoch -> ~0, CPU of
// trainer + worker per epoch 0.61 -> 0.50 s). The producers allocate a
// few large buffers per sample, so they hardly contend for its lock.
void keep_batch_buffers_in_the_heap() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_ARENA_MAX, 1);
}

// The trainer, the credential and the id: the command line's, else the
// job environment's. "" when they are complete, else why not.
std::string connect_settings(DwArgs& a, const JobEnvironment& job) {
  dw::WorkerOptions& o = a.options;
  if (a.bind.empty()) a.bind = job.dw_bind.empty() ? "cores" : job.dw_bind;
  if (o.trainer.empty()) o.trainer = job.trainer;
  if (o.trainer.empty()) return "no trainer address: pass --trainer or set GOLDMINER_TRAINER";
  if (a.secret_file.empty()) a.secret_file = job.secret_file;
  auto peer = auth::peer_auth_of(job.auth, job.auth_job, job.munge_socket, job.secret, a.secret_file);
  if (!peer.ok()) return peer.status().message();
  if (peer->secret.empty() && !peer->munge)
    return "no credential: set GOLDMINER_AUTH=munge with GOLDMINER_AUTH_JOB (as under Slurm), or "
           "GOLDMINER_SECRET, or pass --secret-file (never a secret on the command line)";
  o.secret = peer->secret;
  o.munge = peer->munge;
  if (o.id.empty()) o.id = dw::default_worker_id();
  if (a.trainer_job != 0) {
    // No squeue here, or no answer: the connect timeout decides.
    o.trainer_gone = [job_id = a.trainer_job, slurm = user_slurm_command(20)] {
      return trainer_job_ended(slurm, job_id);
    };
    o.published_trainer = [job_id = a.trainer_job, slurm = user_slurm_command(20)] {
      return published_trainer(slurm, job_id);
    };
  }
  return "";
}

// The cores this worker may use (hwloc: its cpuset and affinity): one
// producer thread on each, and the program's intra-op threads sharing
// them out; the program loader with those threads.
Status use_cores(DwArgs& a, const JobEnvironment& job) {
  dw::WorkerOptions& o = a.options;
  auto binder = dw::CpuBinder::create();
  if (!binder.ok()) return binder.status();
  std::shared_ptr<const dw::CpuBinder> cores = std::move(binder).value();
  const int intra_op = a.intra_op != 0 ? a.intra_op : std::max<int>(1, static_cast<int>(cores->cores() / o.threads));
  if (a.bind == "cores") {
    o.on_producer_start = [cores, threads = o.threads](uint32_t i) {
      Status s = cores->bind_this_thread(i, threads);
      if (!s.ok()) log::error("goldminer-dw: " + s.message() + "; the thread runs unbound");
    };
  }
  log::info("goldminer-dw: " + std::to_string(o.threads) + " threads on " + cores->describe() +
            (a.bind == "cores" ? ", each bound to its share" : ", unbound") + "; " + std::to_string(intra_op) +
            " intra-op threads a program call");
  // On the host, a trainer's container image (the program's image=) is
  // entered to run its Python code with the image's Python and torch.
  o.load_program = [intra_op, python = job.python](const std::string& bytes) {
    return dw::is_python_program(bytes) ? dw::load_python_program(bytes, intra_op, python, true)
                                        : dw::load_torchscript(bytes, intra_op);
  };
  return Status();
}

void print_report(const std::string& id, const dw::WorkerReport& r) {
  std::fprintf(stderr,
               "goldminer-dw: %s: sent %llu batches, finished %llu splits, returned %llu, failed %llu; %llu frames "
               "through shared memory, %llu built there (%s)\n",
               id.c_str(), static_cast<unsigned long long>(r.batches_sent),
               static_cast<unsigned long long>(r.splits_done), static_cast<unsigned long long>(r.splits_returned),
               static_cast<unsigned long long>(r.splits_failed),
               static_cast<unsigned long long>(r.batches_shared_memory),
               static_cast<unsigned long long>(r.batches_built_in_place),
               r.shared_memory.empty() ? "none in this transport" : r.shared_memory.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  // First: a SIGTERM that comes while libraries load still drains.
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a Python dataset child that died: an error from write(), not death
  keep_batch_buffers_in_the_heap();

  DwArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(dw_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  auto job = process_job_environment(kReadByWorker);
  if (!job.ok()) return fail(job.status().message(), 2);
  if (a.print_config) {
    std::fputs((describe_command_line(dw_command(&a), command_line) + describe_job_environment(*job, kReadByWorker))
                   .c_str(),
               stdout);
    return 0;
  }
  if (std::string why = connect_settings(a, *job); !why.empty()) return fail(why, 2);
  if (!a.verbose)
    log::set_sink([](log::Level level, const std::string& line) {
      if (level == log::Level::kError) std::fprintf(stderr, "%s\n", line.c_str());
    });
  if (Status s = use_cores(a, *job); !s.ok()) return fail(s.message(), 1);

  auto report = dw::run_worker(a.options, g_stop);
  if (!report.ok()) {
    if (report.status().message() == dw::kStopped) return 0;  // stopped before any work
    if (report.status().message().rfind(dw::kTrainerGone, 0) == 0) {  // nothing to serve: not a failure
      std::fprintf(stderr, "goldminer-dw: %s\n", report.status().message().c_str());
      return 0;
    }
    return fail(report.status().message(), 1);
  }
  if (a.verbose) print_report(a.options.id, *report);
  return 0;
}
