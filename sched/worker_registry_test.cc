#include "sched/worker_registry.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

// A job whose trainer would take 100 batches/s and gets 50 (waits half
// the time), each worker making `per_worker` batches/s.
SessionReport report(uint32_t job, double per_worker, int workers = 1) {
  SessionReport r;
  r.job_id = job;
  r.nonce = 0xfedcba9876543210ull;
  r.workers = workers;
  r.dw_max = 16;
  r.cpus_per_dw = 1;
  r.trainer_wait_fraction = 0.5;
  r.queue_fill = 0.1;
  r.consumption_rate = 50;
  r.per_worker_rate = per_worker;
  r.samples_per_s = 50 * 256;
  r.worker_hosts = {"c1", "c2"};
  return r;
}

TEST(WorkerRegistryTest, ReportsRoundTripAndBadOnesAreNamed) {
  SessionReport r = report(42, 25);
  auto back = decode_report(encode_report(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->job_id, 42u);
  EXPECT_EQ(back->nonce, 0xfedcba9876543210ull);
  EXPECT_EQ(back->dw_max, 16);
  EXPECT_DOUBLE_EQ(back->trainer_wait_fraction, 0.5);
  EXPECT_DOUBLE_EQ(back->per_worker_rate, 25);
  EXPECT_EQ(back->worker_hosts, r.worker_hosts);
  std::string text = encode_report(r);
  EXPECT_EQ(decode_report(text + "color=red\n").status().message(), "report: color: unknown key");
  EXPECT_EQ(decode_report(text + "job=43\n").status().message(), "report: job: given twice");
  EXPECT_EQ(decode_report("job=1\n").status().message(), "report: nonce: missing");
  std::string bad = text;
  bad.replace(bad.find("wait=0.5"), 8, "wait=2");
  EXPECT_EQ(decode_report(bad).status().message(), "report: wait: invalid value '2': expected a number from 0 to 1");
  EXPECT_EQ(decode_report("garbage\n").status().message(), "report: expected key=value, got 'garbage'");
}

TEST(WorkerRegistryTest, AnswersRoundTripAndBadOnesAreNamed) {
  TargetAnswer a{7, 18446744073709551615ull, 3};
  auto back = decode_answer(encode_answer(a));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->job_id, 7u);
  EXPECT_EQ(back->nonce, 18446744073709551615ull);
  EXPECT_EQ(back->target, 3);
  EXPECT_EQ(decode_answer("job=7\nnonce=1\n").status().message(), "answer: target: missing");
  EXPECT_EQ(decode_answer("job=0\nnonce=1\ntarget=1\n").status().message(),
            "answer: job: invalid value '0': expected a job id");
  EXPECT_EQ(decode_answer("job=7\nnonce=-1\ntarget=1\n").status().message(),
            "answer: nonce: invalid value '-1': expected a whole number");
  EXPECT_EQ(decode_answer("job=7\nnonce=1\ntarget=1.5\n").status().message(),
            "answer: target: invalid value '1.5': expected a whole number");
}

TEST(WorkerRegistryTest, AClaimComesFromTheMeasuredRates) {
  DwClaim c = claim_of(report(1, 25));
  EXPECT_DOUBLE_EQ(c.gain_per_worker, 0.25) << "demand 50 / (1 - 0.5) = 100 batches/s, 25 per worker";
  EXPECT_EQ(saturating_workers(c), 4);
  EXPECT_EQ(c.cpu_per_worker, 1000);
  EXPECT_EQ(c.min_workers, 1);
  // Not measured yet: it is taken to need all of its dw-max.
  EXPECT_EQ(saturating_workers(claim_of(report(1, 0))), 16);
}

// Two jobs share 5 worker CPUs by marginal value, not first come first
// served: A saturates at 4 workers, B at 8. After one each (floors), the
// next three go to B (1/0.125 - 1/0.25 = 4), A (1/0.25 - 1/0.5 = 2) and B
// (1/0.25 - 1/0.375 = 1.33), before A's third (0.67).
TEST(WorkerRegistryTest, JobsShareWorkerCpusByMarginalValue) {
  WorkerRegistry reg(5, 30);
  ASSERT_TRUE(reg.accept(report(1, 25), 1000, 1000, 0).ok());
  ASSERT_TRUE(reg.accept(report(2, 12.5), 1001, 1001, 0).ok());
  reg.reallocate(1);
  EXPECT_EQ(reg.target(1), 2);
  EXPECT_EQ(reg.target(2), 3);
  reg.set_worker_cpus(100);
  reg.reallocate(2);
  EXPECT_EQ(reg.target(1), 4) << "enough for both: each up to what saturates it";
  EXPECT_EQ(reg.target(2), 8);
}

TEST(WorkerRegistryTest, AReportForAnotherUsersJobIsRefused) {
  WorkerRegistry reg(8, 30);
  Status st = reg.accept(report(7, 25), 1001, 1000, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "job 7: report from uid 1001 refused: the job is uid 1000's");
  EXPECT_TRUE(reg.jobs().empty());
  EXPECT_EQ(reg.target(7), -1);
}

TEST(WorkerRegistryTest, SilentJobsAreDropped) {
  WorkerRegistry reg(8, 30);
  ASSERT_TRUE(reg.accept(report(1, 25), 0, 0, 0).ok());
  ASSERT_TRUE(reg.accept(report(2, 25), 0, 0, 20).ok());
  reg.reallocate(31);
  EXPECT_EQ(reg.target(1), -1);
  EXPECT_EQ(reg.target(2), 4);
}

TEST(WorkerRegistryTest, ShowsEachJobAsJsonAndPrometheusText) {
  WorkerRegistry reg(8, 30);
  ASSERT_TRUE(reg.accept(report(3, 25, 2), 1000, 1000, 0).ok());
  reg.reallocate(0);
  EXPECT_EQ(reg.json(),
            "{\"worker_cpus\": 8, \"worker_cpus_held\": 2, \"jobs\": [{\"job\": 3, \"uid\": 1000, \"workers\": 2, \"target\": 4, "
            "\"dw_max\": 16, \"cpus_per_dw\": 1, \"trainer_wait_fraction\": 0.5, \"queue_fill\": 0.1, "
            "\"samples_per_s\": 12800, \"hosts\": [\"c1\", \"c2\"]}]}");
  std::string text = reg.prometheus();
  EXPECT_NE(text.find("# TYPE goldminer_job_worker_target gauge\ngoldminer_job_worker_target{job=\"3\"} 4\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("goldminer_worker_cpus 8\n"), std::string::npos);
  // goldminer-top's screen; uid 4294967 has no name here: shown as the number.
  WorkerRegistry top(8, 30);
  SessionReport r = report(3, 25, 3);
  r.worker_hosts = {"c1", "c1", "c2"};
  ASSERT_TRUE(top.accept(r, 4294967, 4294967, 0).ok());
  top.reallocate(0);
  EXPECT_EQ(top.table(),
            "worker CPUs: 8, held by 1 jobs' workers: 3\n\n"
            "JOB        USER       WORKERS TARGET DW-MAX WAIT% FILL%   SAMPLES/S  WORKER HOSTS\n"
            "3          4294967          3      4     16    50    10       12800  c1*2,c2\n");
}

}  // namespace
}  // namespace goldminer
