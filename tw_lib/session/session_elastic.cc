// The trainer session's elastic thread (SessionOptions::elastic;
// tw_lib/session/session_impl.h).
#include <cstdio>

#include "gmcore/log.h"
#include "launch/node_address.h"
#include "sched/session_report.h"
#include "tw_lib/session/session_impl.h"

namespace goldminer {
namespace {

// A scaling window lasts the interval and, while the trainer is busy with
// its own steps rather than waiting, until it took this many batches (one
// or two batches of a slow trainer measure its step time, not its
// workers), at most kMaxWindowIntervals intervals.
constexpr uint64_t kMinWindowBatches = 8;
constexpr double kMaxWindowIntervals = 12;

// What the session knows of goldminer-ctld's answers: whether the last
// report got one, and the last error it logged (each change is logged
// once).
struct CtldLink {
  bool answers = false;
  std::string error;
};

// Sends `report` (ElasticSetup::report): the job's target, or -1 when
// goldminer-ctld did not answer (the session then sizes itself).
int ask_ctld(const ElasticSetup& e, const SessionReport& report, CtldLink* link) {
  auto answer = e.report(report);
  if (answer.ok()) {
    if (!link->answers) log::info("goldminer: session: goldminer-ctld at " + e.ctld + " gives the worker target");
    link->answers = true, link->error.clear();
    return *answer;
  }
  if (answer.status().message() != link->error || link->answers) {
    link->error = answer.status().message();
    link->answers = false;
    log::error("goldminer: session: goldminer-ctld: " + link->error + "; sizing the workers by itself until it answers");
  }
  return -1;
}

}  // namespace

// Every interval: the queue's metrics over the interval to the
// controller, and what it says done (sched/elastic.h).
void Session::Impl::elastic_loop() {
  const ElasticSetup& e = o_.elastic;
  ElasticController controller(e.config, e.launcher.get(), now());
  const std::string here = node_name();  // workers whose id starts with it share the trainer's node
  CtldLink ctld;
  std::unique_lock<std::mutex> lock(mu_);
  // Rank 0 of ranks that share the job's workers sizes them for the job:
  // its own and the other ranks' workers and batches (their RankStatus).
  // Its own waits and queue stand for every rank's, as DDP's ranks step
  // together. mu_ held.
  const SessionCounters& c = counters_;
  // Those the job keeps: workers asked to drain (or about to be) are
  // leaving, so a shrink is not asked for twice while a drain is under
  // way (below min_workers, or both an undo's and a shrink's).
  auto kept_workers = [&] { return c.kept_workers(drain_requests_); };
  uint64_t arrived = c.job_arrived(), consumed = c.consumed_total, fills = c.fill_samples;
  double waited = c.wait_total, since = now(), fill_sum = c.fill_sum;
  WorkerRateEstimate worker_rate;
  const ReportedJob reported{e.job_id, e.config.autosizer.max_workers, e.cpus_per_dw};
  const auto interval = std::chrono::duration<double>(e.interval_s);
  int left_seen = c.job_left();
  for (;;) {
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(interval);
    // Until the interval ends; a worker that leaves unasked (killed, its
    // node lost, preempted) is replaced at once, not at the interval's end.
    while (elastic_cv_.wait_until(lock, until, [&] { return elastic_stop_ || c.job_left() > left_seen; })) {
      if (elastic_stop_) return;
      const int lost = c.job_left() - left_seen, workers = kept_workers(), joined = c.joined_total + c.redirected_total;
      left_seen = c.job_left();
      lock.unlock();  // the launcher runs sbatch
      const ElasticStep step = controller.replace_lost(lost, workers, joined, now());
      if (step.started > 0)
        log::info("goldminer: session: " + std::to_string(lost) + " data workers left unasked, " +
                  std::to_string(workers) + " connected: started " + std::to_string(step.started) +
                  " more data workers to replace them");
      if (!step.error.empty()) log::error("goldminer: session: cannot start more data workers: " + step.error);
      lock.lock();
    }
    if (elastic_stop_) return;
    const double t = now(), window = std::max(1e-9, t - since);
    // A trainer busy with its own steps (waiting less than half the
    // window) that took few batches: the window goes on. One that waits
    // (for its first workers, or starved) ends it: that is for the
    // autosizer to see now.
    const uint64_t taken = c.consumed_total - consumed;
    if (taken < kMinWindowBatches && (c.wait_total - waited) < 0.5 * window &&
        window < kMaxWindowIntervals * e.interval_s)
      continue;
    counters_.scaling_window_s = window, counters_.scaling_window_batches = taken;
    QueueMetrics m;
    m.workers = kept_workers();
    m.joined = c.joined_total + c.redirected_total;
    m.arrival_rate = static_cast<double>(c.job_arrived() - arrived) / window;
    // Every rank takes as many batches as rank 0 (they step together).
    const double ranks = o_.rank0.empty() ? 1.0 : static_cast<double>(o_.world_size);
    m.consumption_rate = ranks * static_cast<double>(c.consumed_total - consumed) / window;
    m.trainer_wait_fraction = std::min(1.0, (c.wait_total - waited) / window);
    m.samples_per_s = m.consumption_rate * o_.batch_size;
    for (const auto& [peer, w] : c.per_worker) {
      m.warming += w.batches == 0 && !w.draining;
      m.starting += !w.asked_for_splits && !w.draining;
      m.local_workers += !w.draining && node_of_worker(w.id) == here;
    }
    // The fill as the trainer found it when it took batches in the
    // window; now, when it took none.
    m.queue_fill = c.fill_samples > fills ? (c.fill_sum - fill_sum) / static_cast<double>(c.fill_samples - fills)
                                          : queue_.fill(c.per_worker.size());
    m.per_worker_rate = worker_rate.observe(m.arrival_rate, m.workers, m.queue_fill);
    arrived = c.job_arrived(), consumed = c.consumed_total, waited = c.wait_total, since = t;
    fills = c.fill_samples, fill_sum = c.fill_sum;
    SessionReport report;
    if (e.report) {
      // What the job measured so far (as of the last window), its knee.
      report = report_window(reported, m, controller.policy(), t, controller.report_ceiling(m, t),
                             controller.coming(m, t));
      for (const auto& [peer, w] : c.per_worker) report.worker_hosts.push_back(node_of_worker(w.id));
    }
    lock.unlock();  // the launcher runs Slurm's commands, the report goes out
    const int target = e.report ? ask_ctld(e, report, &ctld) : -1;
    const ElasticStep step = controller.observe(m, t, target);
    if (!step.decision.empty()) log::info("goldminer: session: scaling: " + step.decision);
    char why[160];
    std::snprintf(why, sizeof why, "%d workers, trainer waited %.0f %% of the last %.1f s, queue %.0f %% full",
                  m.workers, 100 * m.trainer_wait_fraction, window, 100 * m.queue_fill);
    const std::string by = target >= 0 ? " (goldminer-ctld's target: " + std::to_string(target) + ")" : "";
    if (step.started > 0) log::info("goldminer: session: " + std::string(why) + by + ": started " +
                                    std::to_string(step.started) + " more data workers");
    if (!step.error.empty()) log::error("goldminer: session: cannot start more data workers: " + step.error);
    if (step.cancelled > 0) log::info("goldminer: session: " + std::string(why) + by + ": cancelled " +
                                      std::to_string(step.cancelled) + " data workers still waiting to start");
    if (step.drain > 0) {
      if (step.drain_trainer_node_first) {
        std::lock_guard<std::mutex> drains(mu_);
        drain_first_on_ = here;
      }
      log::info("goldminer: session: " + std::string(why) + by + ": draining " + std::to_string(step.drain) +
                " data workers" + (step.drain_trainer_node_first ? ", those on this node (" + here + ") first" : ""));
      drain_workers(static_cast<size_t>(step.drain));
    }
    lock.lock();
  }
}

}  // namespace goldminer
