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

}  // namespace

int main(int argc, char** argv) {
  // First: a SIGTERM that comes while libraries load still drains.
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a Python dataset child that died: an error from write(), not death

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
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_ARENA_MAX, 1);

  DwArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(dw_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  dw::WorkerOptions& o = a.options;
  std::string &secret_file = a.secret_file, &bind = a.bind;
  int intra_op = a.intra_op;
  const uint32_t trainer_job = a.trainer_job;
  const bool verbose = a.verbose;
  auto job = process_job_environment(kReadByWorker);
  if (!job.ok()) return fail(job.status().message(), 2);
  if (a.print_config) {
    std::fputs((describe_command_line(dw_command(&a), command_line) + describe_job_environment(*job, kReadByWorker))
                   .c_str(),
               stdout);
    return 0;
  }
  if (bind.empty()) bind = job->dw_bind.empty() ? "cores" : job->dw_bind;
  if (o.trainer.empty()) o.trainer = job->trainer;
  if (o.trainer.empty()) return fail("no trainer address: pass --trainer or set GOLDMINER_TRAINER", 2);
  if (secret_file.empty()) secret_file = job->secret_file;
  auto peer = auth::peer_auth_of(job->auth, job->auth_job, job->munge_socket, job->secret, secret_file);
  if (!peer.ok()) return fail(peer.status().message(), 2);
  if (peer->secret.empty() && !peer->munge)
    return fail("no credential: set GOLDMINER_AUTH=munge with GOLDMINER_AUTH_JOB (as under Slurm), or "
                "GOLDMINER_SECRET, or pass --secret-file (never a secret on the command line)", 2);
  o.secret = peer->secret;
  o.munge = peer->munge;
  if (o.id.empty()) o.id = dw::default_worker_id();
  if (!verbose)
    log::set_sink([](log::Level level, const std::string& line) {
      if (level == log::Level::kError) std::fprintf(stderr, "%s\n", line.c_str());
    });
  // The cores this worker may use (hwloc: its cpuset and affinity): one
  // producer thread on each, and the program's intra-op threads sharing
  // them out.
  auto binder = dw::CpuBinder::create();
  if (!binder.ok()) return fail(binder.status().message(), 1);
  std::shared_ptr<const dw::CpuBinder> cores = std::move(binder).value();
  if (intra_op == 0) intra_op = std::max<int>(1, static_cast<int>(cores->cores() / o.threads));
  if (bind == "cores") {
    o.on_producer_start = [cores, threads = o.threads](uint32_t i) {
      Status s = cores->bind_this_thread(i, threads);
      if (!s.ok()) log::error("goldminer-dw: " + s.message() + "; the thread runs unbound");
    };
  }
  log::info("goldminer-dw: " + std::to_string(o.threads) + " threads on " + cores->describe() +
            (bind == "cores" ? ", each bound to its share" : ", unbound") + "; " + std::to_string(intra_op) +
            " intra-op threads a program call");
  o.load_program = [intra_op, python = job->python](const std::string& bytes) {
    return dw::is_python_program(bytes) ? dw::load_python_program(bytes, intra_op, python)
                                        : dw::load_torchscript(bytes, intra_op);
  };

  if (trainer_job != 0) {
    // No squeue here, or no answer: the connect timeout decides.
    o.trainer_gone = [trainer_job, slurm = user_slurm_command(20)] { return trainer_job_ended(slurm, trainer_job); };
    o.published_trainer = [trainer_job, slurm = user_slurm_command(20)] { return published_trainer(slurm, trainer_job); };
  }

  auto report = dw::run_worker(o, g_stop);
  if (!report.ok()) {
    if (report.status().message() == dw::kStopped) return 0;  // stopped before any work
    if (report.status().message().rfind(dw::kTrainerGone, 0) == 0) {  // nothing to serve: not a failure
      std::fprintf(stderr, "goldminer-dw: %s\n", report.status().message().c_str());
      return 0;
    }
    return fail(report.status().message(), 1);
  }
  if (verbose)
    std::fprintf(stderr,
                 "goldminer-dw: %s: sent %llu batches, finished %llu splits, returned %llu, failed %llu; %llu frames through "
                 "shared memory, %llu built there (%s)\n",
                 o.id.c_str(), static_cast<unsigned long long>(report->batches_sent),
                 static_cast<unsigned long long>(report->splits_done),
                 static_cast<unsigned long long>(report->splits_returned),
                 static_cast<unsigned long long>(report->splits_failed),
                 static_cast<unsigned long long>(report->batches_shared_memory),
                 static_cast<unsigned long long>(report->batches_built_in_place),
                 report->shared_memory.empty() ? "none in this transport" : report->shared_memory.c_str());
  return 0;
}
