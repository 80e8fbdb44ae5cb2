#include "launch/companion_job.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "launch/shell_quote.h"

namespace goldminer {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool any_starts_with(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
}

// A site with only dw_command set, and batch job 7 on the local node.
AdminConfig plain_site() {
  AdminConfig admin;
  admin.dw_command = "/usr/bin/goldminer-dw";
  return admin;
}
BatchJob local_job_7() {
  BatchJob job;
  job.job_id = 7;
  job.node_address = "127.0.0.1";
  job.trainer_port = 20007;
  return job;
}

TEST(CompanionJobTest, OnlyUcxJobsWithWorkersGetOne) {
  JobOptions o;
  EXPECT_EQ(why_no_companion_job(o), "");
  o.mode = ScalingMode::kStatic;
  EXPECT_EQ(why_no_companion_job(o), "");
  o.dw = 0;
  EXPECT_EQ(why_no_companion_job(o), "dw=0: no data workers at start");
  o.dw = 2;
  o.transport = Transport::kMpi;
  EXPECT_NE(why_no_companion_job(o).find("transport=mpi"), std::string::npos);
}

TEST(CompanionJobTest, PlansWorkersInTheSitePartitionWithTheSecretOffTheCommandLine) {
  JobOptions o;
  o.dw = 2;
  o.cpus_per_dw = 3;
  AdminConfig admin;
  admin.dw_partition = "cpu";
  admin.dw_command = "/opt/gm/bin/goldminer-dw";
  BatchJob job;
  job.job_id = 20042;
  job.node_address = "10.9.0.2";
  job.trainer_port = 31234;  // what the node's registry gave it
  job.env = {"PATH=/usr/bin:/bin",      "HOME=/home/u",         "PWD=/home/u/run",
             "SLURM_JOB_PARTITION=gpu", "SLURM_GPUS=1",         "SLURM_CONF=/etc/gm/slurm.conf",
             "SBATCH_PARTITION=gpu",    "SRUN_CPUS_PER_TASK=4", "GOLDMINER_DW=2",
             "UCX_NET_DEVICES=lo",      "SLURM_JOB_ACCOUNT=ml",
             "_SLURM_SPANK_OPTION_goldminer_goldminer=dw=2",
             "SLURM_SPANK__SLURM_SPANK_OPTION_goldminer_goldminer=dw=2", "SPANK_X=1"};
  job.elastic = true;  // mode=elastic
  CompanionJob c = plan_companion_job(o, admin, job);

  EXPECT_EQ(c.trainer, "ucx://10.9.0.2:31234");
  using Env = std::vector<std::pair<std::string, std::string>>;
  ASSERT_EQ(c.trainer_env.size(), 6u);
  EXPECT_EQ(Env(c.trainer_env.begin(), c.trainer_env.begin() + 4),
            (Env{{"GOLDMINER_LISTEN", "ucx://10.9.0.2:31234"},
                 {"GOLDMINER_TRAINER", "ucx://10.9.0.2:31234"},
                 {"GOLDMINER_AUTH", "munge"},
                 {"GOLDMINER_AUTH_JOB", "20042"}}))
      << "no secret: trainer and workers prove uid and job with munge";
  // mode=elastic: how the session starts one more worker.
  EXPECT_EQ(c.trainer_env[4].first, "GOLDMINER_DW_SBATCH");
  EXPECT_EQ(*split_words(c.trainer_env[4].second), c.worker_sbatch_args);
  std::vector<std::string> one = c.sbatch_args;
  std::replace(one.begin(), one.end(), std::string("--ntasks=2"), std::string("--ntasks=1"));
  EXPECT_EQ(c.worker_sbatch_args, one) << "the same job but one task";
  EXPECT_EQ(c.trainer_env[5], (std::pair<std::string, std::string>{"UCX_TCP_CM_REUSEADDR", "y"}));
  job.elastic = false;
  EXPECT_EQ(plan_companion_job(o, admin, job).trainer_env.size(), 5u) << "static: no growing";
  job.env.push_back("UCX_TCP_CM_REUSEADDR=n");
  EXPECT_EQ(plan_companion_job(o, admin, job).trainer_env.size(), 4u) << "the job's own setting wins";
  job.env.pop_back();
  job.ucx_port = 31235;  // firewall=nftables
  EXPECT_EQ(plan_companion_job(o, admin, job).trainer_env[4],
            (std::pair<std::string, std::string>{"GOLDMINER_UCX_PORT", "31235"}));
  job.ucx_port = 0;
  EXPECT_EQ(c.work_dir, "/home/u/run");

  const auto& a = c.sbatch_args;
  EXPECT_EQ(a.front(), "--parsable");
  EXPECT_TRUE(has(a, "--job-name=goldminer-dw.20042"));
  EXPECT_TRUE(has(a, "--ntasks=2"));
  EXPECT_TRUE(has(a, "--cpus-per-task=3"));
  EXPECT_TRUE(has(a, "--partition=cpu")) << "the site's dw_partition wins over the job's";
  EXPECT_TRUE(has(a, "--account=ml"));
  EXPECT_FALSE(any_starts_with(a, "--qos=")) << "neither the site nor the job named one";
  EXPECT_TRUE(has(a, "--chdir=/home/u/run"));
  EXPECT_TRUE(has(a, "--export=ALL"));
  EXPECT_TRUE(has(a, "--wrap=exec srun --mpi=none /opt/gm/bin/goldminer-dw --threads 3 --connect-timeout " +
                         std::to_string(kCompanionConnectTimeoutS) + " --trainer-job 20042 -v"));

  const auto& e = c.sbatch_env;
  for (const char* kept : {"PATH=/usr/bin:/bin", "HOME=/home/u", "PWD=/home/u/run", "UCX_NET_DEVICES=lo",
                           "SLURM_CONF=/etc/gm/slurm.conf", "GOLDMINER_TRAINER=ucx://10.9.0.2:31234",
                           "GOLDMINER_AUTH=munge", "GOLDMINER_AUTH_JOB=20042"})
    EXPECT_TRUE(has(e, kept)) << kept;
  for (const char* dropped : {"SLURM_GPUS=", "SLURM_JOB_PARTITION=", "SBATCH_", "SRUN_", "GOLDMINER_DW=",
                              "_SLURM_SPANK_OPTION_", "SLURM_SPANK_", "SPANK_", "GOLDMINER_SECRET=",
                              "GOLDMINER_MUNGE_SOCKET="})
    EXPECT_FALSE(any_starts_with(e, dropped)) << dropped;
  admin.munge_socket = "/run/gm/munge.socket";
  EXPECT_TRUE(has(plan_companion_job(o, admin, job).sbatch_env, "GOLDMINER_MUNGE_SOCKET=/run/gm/munge.socket"))
      << "the site's munged socket reaches the workers";
}

TEST(CompanionJobTest, FallsBackToTheJobsOwnPartitionAndQosAndNeverPassesASecret) {
  JobOptions o;
  const AdminConfig admin = plain_site();
  BatchJob job = local_job_7();
  job.env = {"SLURM_JOB_PARTITION=batch", "SLURM_JOB_QOS=normal", "SLURM_SUBMIT_DIR=/srv/run",
             "GOLDMINER_SECRET=mine", "PWD=relative"};
  CompanionJob c = plan_companion_job(o, admin, job);
  EXPECT_TRUE(has(c.sbatch_args, "--partition=batch"));
  EXPECT_TRUE(has(c.sbatch_args, "--qos=normal"));
  EXPECT_FALSE(any_starts_with(c.sbatch_args, "--account="));
  EXPECT_EQ(c.work_dir, "/srv/run") << "PWD is not absolute: the submit directory";
  job.work_dir = "/scratch/u/run";
  EXPECT_EQ(plan_companion_job(o, admin, job).work_dir, "/scratch/u/run") << "squeue's answer first";
  job.work_dir.clear();
  for (const auto& [name, value] : c.trainer_env) EXPECT_NE(name, "GOLDMINER_SECRET");
  EXPECT_FALSE(any_starts_with(c.sbatch_env, "GOLDMINER_SECRET=")) << "the job's own secret stays in its job";

  job.env.clear();
  EXPECT_EQ(plan_companion_job(o, admin, job).work_dir, "/");
}

TEST(CompanionJobTest, CompanionJobsGetTheBatchJobsTimeLeft) {
  JobOptions o;
  const AdminConfig admin = plain_site();
  BatchJob job = local_job_7();
  EXPECT_FALSE(any_starts_with(plan_companion_job(o, admin, job).sbatch_args, "--time="))
      << "an unlimited batch job gives no limit";
  job.time_left = "1-02:03:04";
  CompanionJob c = plan_companion_job(o, admin, job);
  EXPECT_TRUE(has(c.sbatch_args, "--time=1-02:03:04"));
  EXPECT_TRUE(has(c.worker_sbatch_args, "--time=1-02:03:04")) << "elastic workers too";
}

// A fake squeue/scancel: squeue answers the outputs in `answers` one by one
// (the last one for ever after; "error" fails as when slurmctld is down);
// every call is recorded.
struct FakeSlurm {
  explicit FakeSlurm(std::vector<std::string> outputs) : answers(std::move(outputs)) {}
  std::vector<std::string> answers;
  std::vector<std::string> calls;
  int scancel_exit = 0;
  size_t asked = 0;
  SlurmCommand command() {
    return [this](const std::string& name, const std::vector<std::string>& args) -> Expected<CommandResult> {
      std::string call = name;
      for (const std::string& a : args) call += " " + a;
      calls.push_back(call);
      CommandResult r;
      if (name == "squeue") {
        const std::string& out = answers.at(std::min(asked++, answers.size() - 1));
        r.exit_code = out == "error" ? 1 : 0;
        r.output = out == "error" ? "squeue: error: Unable to contact slurm controller\n" : out;
      } else {
        r.exit_code = scancel_exit;
        if (scancel_exit != 0) r.output = "scancel: error: Access/permission denied\n";
      }
      return r;
    };
  }
  size_t count(const std::string& call) const { return std::count(calls.begin(), calls.end(), call); }
};

const char* const kList = "squeue --noheader --format=%i %T --name=goldminer-dw.42 --user=1000";

TEST(CompanionJobTest, EndingJobsThatEndByThemselvesSendsNothing) {
  FakeSlurm slurm({"43 RUNNING\n44 RUNNING\n", "43 RUNNING\n44 COMPLETING\n", "44 COMPLETED\n"});
  EXPECT_TRUE(end_companion_jobs(42, 1000, slurm.command(), 5, 5, 0.001).ok());
  EXPECT_EQ(slurm.count(kList), 3u);
  EXPECT_EQ(slurm.calls.size(), 3u) << "no scancel";
}

TEST(CompanionJobTest, RunningWorkersGetSigtermAndDrain) {
  FakeSlurm slurm({"43 RUNNING\n44 RUNNING\n"});
  // Still running after the self-end wait: SIGTERM to both; then they complete.
  auto run = slurm.command();
  SlurmCommand term_then_done = [&](const std::string& name, const std::vector<std::string>& args) {
    if (name == "scancel") {
      slurm.answers = {""};
      slurm.asked = 0;
    }
    return run(name, args);
  };
  EXPECT_TRUE(end_companion_jobs(42, 1000, term_then_done, 0.01, 5, 0.001).ok());
  EXPECT_EQ(slurm.count("scancel --quiet --signal=TERM 43,44"), 1u);
  EXPECT_EQ(slurm.count("scancel --quiet 43,44"), 0u) << "they drained: no hard cancel";
  EXPECT_EQ(slurm.calls.back(), kList);
}

TEST(CompanionJobTest, WorkersThatDoNotDrainAreCancelledAndWaitingOnesAtOnce) {
  FakeSlurm stuck({"43 RUNNING\n45 PENDING\n"});
  EXPECT_TRUE(end_companion_jobs(42, 1000, stuck.command(), 0.01, 0.01, 0.001).ok());
  EXPECT_EQ(stuck.count("scancel --quiet --signal=TERM 43"), 1u) << "only the running one";
  EXPECT_EQ(stuck.calls.back(), "scancel --quiet 43,45");

  FakeSlurm pending({"7 PENDING\n"});
  EXPECT_TRUE(end_companion_jobs(42, 1000, pending.command(), 5, 5, 0.001).ok());
  EXPECT_EQ(pending.calls, (std::vector<std::string>{kList, "scancel --quiet 7"}));

  FakeSlurm gone({""});
  EXPECT_TRUE(end_companion_jobs(42, 1000, gone.command(), 5, 5, 0.001).ok());
  EXPECT_EQ(gone.calls.size(), 1u);

  FakeSlurm refused({"7 PENDING\n"});
  refused.scancel_exit = 1;
  Status s = end_companion_jobs(42, 1000, refused.command(), 5, 5, 0.001);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "cannot cancel jobs 7: scancel: exit 1: scancel: error: Access/permission denied");
}

TEST(CompanionJobTest, WhenSqueueCannotListThemTheyAreCancelledByName) {
  FakeSlurm down({"error"});
  EXPECT_TRUE(end_companion_jobs(42, 1000, down.command(), 5, 5, 0.001).ok());
  EXPECT_EQ(down.calls, (std::vector<std::string>{kList, "scancel --quiet --name=goldminer-dw.42 --user=1000"}));
}

// A slurmctld that stops answering while a step ends: the listing after
// the first overruns its time (an error, as run_command_within makes it).
// Checked: no more polling or waiting (self_end_s is 30 s here), the jobs
// it knew are cancelled at once.
TEST(CompanionJobTest, ACommandThatOverranEndsTheWaitingAndOnlyTheFinalCancelFollows) {
  FakeSlurm slurm({"43 RUNNING\n45 PENDING\n"});
  auto run = slurm.command();
  SlurmCommand slow = [&](const std::string& name, const std::vector<std::string>& args) -> Expected<CommandResult> {
    if (name == "squeue" && slurm.asked >= 1) {
      slurm.calls.push_back("squeue (overran)");
      return Status::error("squeue (/usr/bin/squeue) did not end within 10 s: killed");
    }
    return run(name, args);
  };
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(end_companion_jobs(42, 1000, slow, 30, 30, 0.001).ok());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_EQ(slurm.calls, (std::vector<std::string>{kList, "squeue (overran)", "scancel --quiet 43,45"}));
}

// The same with real processes: a squeue that never answers, run from a
// configured directory with a 0.3 s limit, and a scancel that records its
// arguments. Checked: the step's end takes at most two limits plus their
// SIGKILL graces, and the jobs are cancelled by name.
TEST(CompanionJobTest, AStuckSqueueHoldsTheStepsEndForAtMostTwoCommandTimeouts) {
  char bin[] = "/tmp/gm-slurm-bin-XXXXXX";
  ASSERT_NE(mkdtemp(bin), nullptr);
  const std::string dir = bin, calls = dir + "/scancel.calls";
  std::ofstream(dir + "/squeue") << "#!/bin/sh\nexec sleep 1000\n";
  std::ofstream(dir + "/scancel") << "#!/bin/sh\necho \"$@\" >>" << calls << "\n";
  chmod((dir + "/squeue").c_str(), 0755);
  chmod((dir + "/scancel").c_str(), 0755);
  SlurmCommand run = [&](const std::string& name, const std::vector<std::string>& args) -> Expected<CommandResult> {
    auto spec = command_in(dir, "plugstack.conf slurm_bindir", name, args, {"PATH=/usr/bin:/bin"});
    if (!spec.ok()) return spec.status();
    spec->timeout_s = 0.3;
    return run_command_within(*spec, "plugstack.conf slurm_command_timeout");
  };
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(end_companion_jobs(42, 1000, run).ok());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 2 * (0.3 + kKillGraceS) + 1);
  std::ifstream in(calls);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "--quiet --name=goldminer-dw.42 --user=1000");
  for (const std::string& f : {dir + "/squeue", dir + "/scancel", calls}) std::remove(f.c_str());
  rmdir(bin);
}

// The trainer's address on a node whose address is IPv6 (node_address
// gives it without brackets) has it in brackets.
TEST(CompanionJobTest, AnIpv6TrainerAddressHasBrackets) {
  BatchJob job;
  job.node_address = "fd00:6d67::11";
  job.trainer_port = 20001;
  EXPECT_EQ(plan_companion_job(JobOptions{}, AdminConfig{}, job).trainer, "ucx://[fd00:6d67::11]:20001");
}

}  // namespace
}  // namespace goldminer
