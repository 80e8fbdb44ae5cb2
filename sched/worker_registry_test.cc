#include "sched/worker_registry.h"

#include <gtest/gtest.h>
#include <pwd.h>

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
  EXPECT_TRUE(back->curve.empty());
  EXPECT_EQ(back->knee, -1);
  EXPECT_EQ(back->probing, 0);
}

TEST(WorkerRegistryTest, AHostNameThatIsATerminalEscapeIsRefusedAndShownEscaped) {
  // A window-title change and a screen clear, as real bytes in the report.
  std::string evil = encode_report(report(42, 25));
  evil.replace(evil.find("hosts=c1,c2"), 11, "hosts=c1,\x1b]0;pwned\x07\x1b[2J");
  auto refused = decode_report(evil);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "report: hosts: invalid host name '\\x1b]0;pwned\\x07\\x1b[2J': expected letters, digits and . - _ : [ ] "
            "(at most 255)");
  std::string spaced = encode_report(report(42, 25));
  spaced.replace(spaced.find("hosts=c1,c2"), 11, "hosts=c1,c 2");
  EXPECT_FALSE(decode_report(spaced).ok());
  std::string addresses = encode_report(report(42, 25));
  addresses.replace(addresses.find("hosts=c1,c2"), 11, "hosts=10.0.0.7,[::1],gpu-07.example");
  auto ok = decode_report(addresses);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->worker_hosts, (std::vector<std::string>{"10.0.0.7", "[::1]", "gpu-07.example"}));
}

// A report's text with KEY's line replaced by KEY=VALUE.
std::string with(std::string text, const std::string& key, const std::string& value) {
  size_t at = text.find("\n" + key + "=") + 1;
  text.replace(at, text.find('\n', at) - at, key + "=" + value);
  return text;
}

std::vector<CurvePoint> curve(std::vector<std::pair<int, double>> points) {
  std::vector<CurvePoint> out;
  for (const auto& [w, s] : points) out.push_back(CurvePoint{w, s, 0, 0});
  return out;
}

TEST(WorkerRegistryTest, TheMeasuredCurveAndKneeRoundTripAndBadOnesAreNamed) {
  SessionReport r = report(42, 25);
  r.curve = curve({{2, 13700}, {6, 7900}});
  r.knee = 2;
  r.probing = 3;
  const std::string text = encode_report(r);
  EXPECT_NE(text.find("\ncurve=2:13700,6:7900\nknee=2\nprobing=3\nceiling=0\n"), std::string::npos) << text;
  auto back = decode_report(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->curve.size(), 2u);
  EXPECT_EQ(back->curve[1].workers, 6);
  EXPECT_DOUBLE_EQ(back->curve[1].samples_per_s, 7900);
  EXPECT_EQ(back->knee, 2);
  EXPECT_EQ(back->probing, 3);
  EXPECT_EQ(decode_report(with(with(text, "knee", "-1"), "probing", "1")).status().message(),
            "report: probing: 1 without a knee");
  EXPECT_EQ(decode_report(with(text, "ceiling", "5"))->ceiling, 5);
  EXPECT_EQ(decode_report(with(text, "coming", "3"))->coming, 3);
  // One line given a bad value: refused with this message.
  struct Bad {
    const char *key, *value, *message;
  };
  for (const Bad& c : {
           Bad{"knee", "17", "report: knee: invalid value '17': expected a number from -1 to 16"},
           Bad{"probing", "yes", "report: probing: invalid value 'yes': expected a number from 0 to 16"},
           Bad{"probing", "17", "report: probing: invalid value '17': expected a number from 0 to 16"},
           Bad{"coming", "-1", "report: coming: invalid value '-1': expected a number from 0 to 1048576"},
           Bad{"ceiling", "17", "report: ceiling: invalid value '17': expected a number from 0 to 16"},
           Bad{"curve", "6:7900,2:13700",
               "report: curve: entry '2:13700': worker counts must be ascending and distinct"},
           Bad{"curve", "2:fast", "report: curve: entry '2:fast': samples/s must be a number from 0 to 1e15"},
       })
    EXPECT_EQ(decode_report(with(text, c.key, c.value)).status().message(), c.message) << c.key << "=" << c.value;
  std::string old = text.substr(0, text.find("curve="));
  EXPECT_EQ(decode_report(old).status().message(), "report: curve: missing") << "strict: no key is optional";
}

// A flat job (13.7k samples/s at 2 workers and at 6) and a rising one
// (5k at 2, 15k at 6, its trainer waiting half the time: D = 30k).
SessionReport flat_job(uint32_t job) {
  SessionReport r = report(job, 12.5);
  r.curve = curve({{2, 13700}, {6, 13700}});
  r.samples_per_s = 13700;
  r.trainer_wait_fraction = 0;
  return r;
}
SessionReport rising_job(uint32_t job) {
  SessionReport r = report(job, 12.5);
  r.curve = curve({{2, 5000}, {6, 15000}});
  r.samples_per_s = 15000;
  return r;
}

TEST(WorkerRegistryTest, AMeasuredClaimComesFromTheCurveAndTheKneeCapsIt) {
  DwClaim c = claim_of(rising_job(1));
  ASSERT_EQ(c.measured.size(), 2u);
  EXPECT_EQ(c.measured[0].first, 2);
  EXPECT_DOUBLE_EQ(c.measured[0].second, 5000.0 / 30000) << "D = 15000 / (1 - 0.5)";
  EXPECT_DOUBLE_EQ(c.measured[1].second, 0.5);
  EXPECT_EQ(c.cap, -1);
  SessionReport r = rising_job(1);
  r.trainer_wait_fraction = 0;
  r.samples_per_s = 4000;
  EXPECT_DOUBLE_EQ(claim_of(r).measured[1].second, 1) << "D: at least the most measured";
  r.knee = 2;
  EXPECT_EQ(claim_of(r).cap, 2);
  EXPECT_EQ(claim_of(r).measured.size(), 2u);
  r.probing = 1;
  EXPECT_EQ(claim_of(r).cap, 3) << "one above the knee while it re-probes one";
  r.probing = 4;
  EXPECT_EQ(claim_of(r).cap, 6) << "a probe's step above the knee";
  EXPECT_EQ(claim_of(r).probe, 4) << "granted from slack CPUs only";
  r.probing = 1;
  EXPECT_EQ(claim_of(r).measured.size(), 1u) << "the points above the knee are what the probe measures";
  // A probe's workers still starting are the job's too: the allocation
  // keeps them while the probe is judged (dw_allocation.h held), not only
  // those connected.
  r.workers = 2;
  r.coming = 1;
  EXPECT_EQ(claim_of(r).held, 3);
  r.ceiling = 3;
  EXPECT_EQ(claim_of(r).cap, 3) << "the session's own ceiling";
  r.knee = -1;
  r.probing = 0;
  r.ceiling = 4;
  EXPECT_EQ(claim_of(r).cap, 4) << "no knee yet: the exploring cap the session reports";
  EXPECT_EQ(claim_of(r).probe, 0);
  r.ceiling = 0;
  EXPECT_EQ(claim_of(r).cap, -1) << "a session that says no ceiling";
  // A count that delivered nothing while another delivered is no point of
  // the claim (seen on the devcluster: a window at 4 workers whose new
  // workers had not started read 0 and held the job at 2).
  SessionReport zero = rising_job(1);
  zero.curve = curve({{2, 5000}, {4, 0}});
  ASSERT_EQ(claim_of(zero).measured.size(), 1u);
  EXPECT_EQ(claim_of(zero).measured[0].first, 2);
  // No curve yet: the model alone.
  DwClaim model = claim_of(report(1, 25));
  EXPECT_TRUE(model.measured.empty());
  EXPECT_EQ(model.cap, -1);
  EXPECT_DOUBLE_EQ(model.gain_per_worker, 0.25);
}

// 8 worker CPUs: one worker each first; then the flat job's second worker
// (1/0.5 - 1 = 1 per unit of work) and the rising one's (k/12 a worker up
// to 6, then its last segment's slope: 6, 2, 1, 0.6, 0.4 from 2 to 6).
TEST(WorkerRegistryTest, TheJobWhoseMeasuredCurveRisesGetsTheCpus) {
  WorkerRegistry reg(8, 30);
  ASSERT_TRUE(reg.accept(flat_job(1), 1000, 1000, 0).ok());
  ASSERT_TRUE(reg.accept(rising_job(2), 1000, 1000, 0).ok());
  reg.reallocate(1);
  EXPECT_EQ(reg.target(1), 2);
  EXPECT_EQ(reg.target(2), 6);
  // Plenty of CPUs: the flat one still stops where its curve does, the
  // rising one runs to full speed (its slope 1/12 from 6: at 12).
  reg.set_worker_cpus(100);
  reg.reallocate(2);
  EXPECT_EQ(reg.target(1), 2);
  EXPECT_EQ(reg.target(2), 12);
}

// A rising job that found its knee at 2 (6 workers paid nothing more):
// never above it, whatever the CPUs, until it re-probes; then one above.
TEST(WorkerRegistryTest, TheKneeCapsATargetAndAProbeAllowsOneMore) {
  SessionReport r = rising_job(1);
  r.curve = curve({{1, 5000}, {2, 10000}, {6, 10000}});
  r.knee = 2;
  WorkerRegistry reg(100, 30);
  ASSERT_TRUE(reg.accept(r, 1000, 1000, 0).ok());
  reg.reallocate(0);
  EXPECT_EQ(reg.target(1), 2);
  r.probing = 1;
  ASSERT_TRUE(reg.accept(r, 1000, 1000, 1).ok());
  reg.reallocate(1);
  EXPECT_EQ(reg.target(1), 3);
}

// A soft knee (the session's under goldminer-ctld: its third worker added
// 15 % of the first's rate, under the pay rule, over useful_fraction):
// the workers below it compete on their measured values. Job 1 (D =
// 29,000 samples/s) is worth 0.67 for its 2nd worker and 0.23 for its
// 3rd, a job 2 of the model (each worker a fifth of its speed) 2.5, 0.83,
// 0.42 and 0.25 for its 2nd to 5th: job 1's 3rd comes last, and nothing
// past its knee ever does.
TEST(WorkerRegistryTest, WorkersBelowASoftKneeCompeteOnTheirMeasuredValue) {
  SessionReport soft = report(1, 12.5, 3);
  soft.curve = curve({{1, 10000}, {2, 13000}, {3, 14500}, {4, 14500}});
  soft.samples_per_s = 14500;
  soft.knee = 3;
  const std::vector<std::pair<double, std::pair<int, int>>> cases{{5, {2, 3}}, {7, {2, 5}}, {8, {3, 5}}, {100, {3, 5}}};
  for (const auto& [cpus, want] : cases) {
    WorkerRegistry reg(cpus, 30);
    ASSERT_TRUE(reg.accept(soft, 1000, 1000, 0).ok());
    ASSERT_TRUE(reg.accept(report(2, 20), 1000, 1000, 0).ok());
    reg.reallocate(0);
    EXPECT_EQ(reg.target(1), want.first) << cpus << " CPUs";
    EXPECT_EQ(reg.target(2), want.second) << cpus << " CPUs";
  }
}

TEST(WorkerRegistryTest, ShowsTheCurveAndKneeInJsonTableAndPrometheus) {
  WorkerRegistry reg(8, 30);
  SessionReport r = flat_job(5);
  r.knee = 2;
  ASSERT_TRUE(reg.accept(r, 4294967, 4294967, 0).ok());
  ASSERT_TRUE(reg.accept(report(6, 25), 4294967, 4294967, 0).ok());
  reg.reallocate(0);
  std::string json = reg.json([](const JobEntry&) { return JobView::kFigures; });
  EXPECT_NE(json.find("\"curve\": [[2, 13700], [6, 13700]], \"knee\": 2, \"probing\": 0, \"hosts\": null}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"curve\": [], \"knee\": null, \"probing\": 0"), std::string::npos) << json;
  std::string table = reg.table();
  EXPECT_NE(table.find("5          4294967          1      2     16     2     0    10       13700  c1,c2\n"
                       "           curve (workers:samples/s): 2:13.7k 6:13.7k\n6 "),
            std::string::npos)
      << table;
  std::string text = reg.prometheus();
  EXPECT_NE(text.find("# TYPE goldminer_job_knee gauge\ngoldminer_job_knee{job_id=\"5\",user=\"4294967\"} 2\n# HELP"), std::string::npos)
      << "only the job that knows its knee: " << text;
  EXPECT_NE(text.find("goldminer_job_curve_samples_per_second{job_id=\"5\",user=\"4294967\",workers=\"2\"} 13700\n"
                      "goldminer_job_curve_samples_per_second{job_id=\"5\",user=\"4294967\",workers=\"6\"} 13700\n"),
            std::string::npos)
      << text;
  // Hidden: neither its curve nor its knee.
  text = reg.prometheus([](const JobEntry&) { return JobView::kHidden; });
  EXPECT_EQ(text.find("{job_id=\"5\""), std::string::npos) << text;
  EXPECT_EQ(reg.table([](const JobEntry&) { return JobView::kHidden; }).find("curve"), std::string::npos);
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

// Three jobs of uid 1000 (each saturating at 8 workers) and one of uid
// 1001 share 20 CPUs: without a cap uid 1000 takes more than half; with a
// user share of 0.5 its jobs together get exactly 10, and uid 1001's job
// all it can use (what it gets alone with 100 CPUs).
TEST(WorkerRegistryTest, AUsersShareOfThePoolIsCapped) {
  WorkerRegistry reg(20, 30);
  for (uint32_t job : {1u, 2u, 3u}) ASSERT_TRUE(reg.accept(report(job, 12.5), 1000, 1000, 0).ok());
  SessionReport other = report(4, 12.5);
  other.consumption_rate = 40;  // worth a little less per worker than the others
  ASSERT_TRUE(reg.accept(other, 1001, 1001, 0).ok());
  auto of_1000 = [&] { return reg.target(1) + reg.target(2) + reg.target(3); };
  reg.reallocate(1);
  EXPECT_EQ(of_1000() + reg.target(4), 20);
  EXPECT_GT(of_1000(), 10) << "the cap below changes something";
  reg.set_max_user_share(0.5);
  reg.reallocate(2);
  EXPECT_LE(of_1000(), 10);
  EXPECT_EQ(of_1000(), 10) << "capped, not starved";
  WorkerRegistry alone(100, 30);
  ASSERT_TRUE(alone.accept(other, 1001, 1001, 0).ok());
  alone.reallocate(1);
  EXPECT_EQ(reg.target(4), alone.target(4)) << "uid 1001's job gets what it can use";
  EXPECT_LE(reg.target(4), 10);
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

// Prometheus labels: job_id (Prometheus keeps "job" for the scrape
// target), the partition Slurm gave (escaped as the text format wants),
// the user only for a viewer who may see it.
TEST(WorkerRegistryTest, PrometheusLabelsAJobWithItsIdPartitionAndUser) {
  WorkerRegistry reg(8, 30);
  ASSERT_TRUE(reg.accept(report(3, 25, 2), 0, 0, 0, "gpu\"a\\b").ok());
  reg.reallocate(0);
  std::string full = reg.prometheus();
  EXPECT_NE(full.find("goldminer_job_workers{job_id=\"3\",partition=\"gpu\\\"a\\\\b\",user=\"root\"} 2\n"),
            std::string::npos)
      << full;
  std::string figures = reg.prometheus([](const JobEntry&) { return JobView::kFigures; });
  EXPECT_NE(figures.find("goldminer_job_workers{job_id=\"3\",partition=\"gpu\\\"a\\\\b\"} 2\n"), std::string::npos)
      << figures;
  EXPECT_EQ(figures.find("user="), std::string::npos) << figures;
  EXPECT_EQ(full.find("{job="), std::string::npos) << full;
}

TEST(WorkerRegistryTest, ShowsEachJobAsJsonAndPrometheusText) {
  WorkerRegistry reg(8, 30);
  ASSERT_TRUE(reg.accept(report(3, 25, 2), 1000, 1000, 0).ok());
  reg.reallocate(0);
  EXPECT_EQ(reg.json(),
            "{\"worker_cpus\": 8, \"worker_cpus_held\": 2, \"jobs\": [{\"job\": 3, \"uid\": 1000, \"workers\": 2, \"target\": 4, "
            "\"dw_max\": 16, \"cpus_per_dw\": 1, \"trainer_wait_fraction\": 0.5, \"queue_fill\": 0.1, "
            "\"samples_per_s\": 12800, \"curve\": [], \"knee\": null, \"probing\": 0, \"hosts\": [\"c1\", \"c2\"]}]}");
  std::string text = reg.prometheus();
  EXPECT_NE(text.find("# TYPE goldminer_job_worker_target gauge\ngoldminer_job_worker_target{job_id=\"3\",user=\"" +
                      std::string(getpwuid(1000) != nullptr ? getpwuid(1000)->pw_name : "1000") + "\"} 4\n"),
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
            "JOB        USER       WORKERS TARGET DW-MAX  KNEE WAIT% FILL%   SAMPLES/S  WORKER HOSTS\n"
            "3          4294967          3      4     16     -    50    10       12800  c1*2,c2\n");
}

}  // namespace
}  // namespace goldminer
