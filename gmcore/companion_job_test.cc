#include "gmcore/companion_job.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <utility>

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
  o.mode = ScalingMode::kStatic;
  EXPECT_EQ(plan_companion_job(o, admin, job).trainer_env.size(), 5u) << "static: no growing";
  job.env.push_back("UCX_TCP_CM_REUSEADDR=n");
  EXPECT_EQ(plan_companion_job(o, admin, job).trainer_env.size(), 4u) << "the job's own setting wins";
  job.env.pop_back();
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

// What goldminer-dw --trainer-job makes of squeue's answers.
TEST(CompanionJobTest, TellsATrainerJobThatEndedFromOneThatMayStillRun) {
  EXPECT_EQ(trainer_job_ended(12, 0, "RUNNING\n"), "");
  EXPECT_EQ(trainer_job_ended(12, 0, "PENDING\n"), "") << "requeued: it comes back";
  EXPECT_EQ(trainer_job_ended(12, 0, "SUSPENDED\n"), "");
  EXPECT_EQ(trainer_job_ended(12, 0, "NODE_FAIL\n"), "job 12 is NODE_FAIL");
  EXPECT_EQ(trainer_job_ended(12, 0, "CANCELLED\n"), "job 12 is CANCELLED");
  EXPECT_EQ(trainer_job_ended(12, 0, "COMPLETING\n"), "job 12 is COMPLETING");
  EXPECT_EQ(trainer_job_ended(12, 0, ""), "job 12 is no longer listed by squeue");
  EXPECT_EQ(trainer_job_ended(12, 1, "slurm_load_jobs error: Invalid job id specified\n"),
            "job 12 is no longer known to Slurm");
  EXPECT_EQ(trainer_job_ended(12, 1, "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"),
            "")
      << "a controller restarting ends no worker";
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

TEST(CompanionJobTest, ReadsTheJobIdSbatchPrinted) {
  EXPECT_EQ(*parse_submitted_job_id("123\n"), 123u);
  EXPECT_EQ(*parse_submitted_job_id("123;cluster\n"), 123u);
  EXPECT_EQ(*parse_submitted_job_id("sbatch: warning: something\n456\n"), 456u);
  for (const char* bad : {"", "\n", "sbatch: error: Invalid partition name specified", "0\n",
                          "99999999999\n", "12a\n"}) {
    auto r = parse_submitted_job_id(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("sbatch printed no job id: '", 0), 0u) << r.status().message();
  }
}

TEST(CompanionJobTest, TellsRunningWaitingAndGoneJobsApart) {
  EXPECT_EQ(parse_companion_state(0, "RUNNING\n"), CompanionState::kRunning);
  EXPECT_EQ(parse_companion_state(0, "CONFIGURING\n"), CompanionState::kRunning);
  EXPECT_EQ(parse_companion_state(0, "PENDING\n"), CompanionState::kWaiting);
  EXPECT_EQ(parse_companion_state(0, "SUSPENDED\n"), CompanionState::kWaiting);
  EXPECT_EQ(parse_companion_state(0, "COMPLETING\n"), CompanionState::kGone);
  EXPECT_EQ(parse_companion_state(0, "CANCELLED\n"), CompanionState::kGone);
  EXPECT_EQ(parse_companion_state(0, ""), CompanionState::kGone);
  EXPECT_EQ(parse_companion_state(1, "slurm_load_jobs error: Invalid job id specified\n"), CompanionState::kGone);
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

// plugstack.conf's slurm_bindir and slurm_command_timeout: defaults, values
// and refusals.
TEST(CompanionJobTest, TheSiteSetsWhereSlurmCommandsComeFromAndTheirTimeLimit) {
  auto defaults = parse_admin_config({});
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_EQ(defaults->slurm_command_timeout_s, 10);
  EXPECT_EQ(defaults->slurm_bindir.rfind('/', 0), 0u) << "configure's Slurm prefix: " << defaults->slurm_bindir;
  auto set = parse_admin_config({"slurm_bindir=/opt/slurm/bin", "slurm_command_timeout=30"});
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->slurm_bindir, "/opt/slurm/bin");
  EXPECT_EQ(set->slurm_command_timeout_s, 30);
  EXPECT_FALSE(parse_admin_config({"slurm_bindir=bin"}).ok());
  EXPECT_FALSE(parse_admin_config({"slurm_command_timeout=0"}).ok());
  EXPECT_FALSE(parse_admin_config({"slurm_command_timeout=301"}).ok());
}

// The job's propagated limits, as sbatch writes them (a "U" when the user
// asked with --propagate; RLIM_INFINITY as its number); other variables
// and bad values ignored.
TEST(CompanionJobTest, TheJobsSoftLimitsComeFromItsSlurmRlimitVariables) {
  const std::vector<SoftLimit> limits =
      job_soft_limits({"SLURM_RLIMIT_NOFILE=4096", "SLURM_RLIMIT_CORE=U0", "SLURM_RLIMIT_STACK=18446744073709551615",
                       "SLURM_RLIMIT_AS=12x", "SLURM_RLIMIT_FOO=1", "SLURM_RLIMIT_NPROC=", "PATH=/bin"});
  EXPECT_EQ(limits, (std::vector<SoftLimit>{{RLIMIT_STACK, RLIM_INFINITY}, {RLIMIT_CORE, 0}, {RLIMIT_NOFILE, 4096}}));
  EXPECT_TRUE(job_soft_limits({"SLURM_RLIMIT_NOFILE=99999999999999999999999"}).empty()) << "out of range";
}

TEST(CompanionJobTest, ShellWordsRoundTrip) {
  const std::vector<std::string> words = {"--parsable", "--job-name=goldminer-dw.7", "--comment=data workers of job 7",
                                          "--wrap=exec srun --mpi=none /opt/gm/goldminer-dw -v", "it's", "", "a\"b\\c$"};
  const std::string text = quote_words(words);
  EXPECT_EQ(text.substr(0, 37), "--parsable --job-name=goldminer-dw.7 ");
  auto back = split_words(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, words);
  auto shell = split_words("a  \"b \\\"c\\\"\" 'd e'f\\ g");
  ASSERT_TRUE(shell.ok());
  EXPECT_EQ(*shell, (std::vector<std::string>{"a", "b \"c\"", "d ef g"}));
  EXPECT_EQ(split_words("--x 'open").status().message(), "unterminated ' at offset 4");
  EXPECT_EQ(split_words("\"open").status().message(), "unterminated \" at offset 0");
  EXPECT_EQ(split_words("x\\").status().message(), "a lone \\ at the end");
}

TEST(CompanionJobTest, SlurmCommandsGetOnlyPathAndConf) {
  EXPECT_EQ(slurm_command_env({"HOME=/h", "PATH=/usr/bin", "SLURM_JOB_ID=3", "SLURM_CONF=/etc/s.conf"}),
            (std::vector<std::string>{"PATH=/usr/bin", "SLURM_CONF=/etc/s.conf"}));
  EXPECT_EQ(slurm_command_env({"HOME=/h"}), std::vector<std::string>{});
}

TEST(CompanionJobTest, NodeAddressIsAnIpv4AddressOfTheSitesInterface) {
  auto a = node_address("");
  ASSERT_TRUE(a.ok()) << a.status().message();
  in_addr parsed{};
  EXPECT_EQ(inet_pton(AF_INET, a->c_str(), &parsed), 1) << *a;
  auto lo = node_address("lo");
  ASSERT_TRUE(lo.ok()) << lo.status().message();
  EXPECT_EQ(*lo, "127.0.0.1");
  auto none = node_address("gm-no-such0");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "dw_network: this node has no interface 'gm-no-such0'");
}

// An interface with only IPv6 addresses gives its first one that is not
// link-local, and the trainer's address has it in brackets. Run in a
// network namespace of a child (needs root and `ip`), on a veth there
// (which also gets a link-local address, to be skipped).
TEST(CompanionJobTest, AnInterfaceWithOnlyIpv6GivesItsGlobalAddress) {
  BatchJob job;
  job.node_address = "fd00:6d67::11";
  job.trainer_port = 20001;
  EXPECT_EQ(plan_companion_job(JobOptions{}, AdminConfig{}, job).trainer, "ucx://[fd00:6d67::11]:20001");
  if (geteuid() != 0 || std::system("command -v ip >/dev/null") != 0)
    GTEST_SKIP() << "needs root and ip(8) to make an interface in a network namespace";
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(out[0]);
    std::string text;
    if (unshare(CLONE_NEWNET) != 0 ||
        std::system("ip link add gm6 type veth peer name gm6p && ip link set gm6 up && ip link set gm6p up && "
                    "ip addr add fd00:6d67::11/64 dev gm6 nodad && ip addr add fd00:6d67::12/64 dev gm6 nodad") != 0) {
      text = "setup failed";
    } else {
      for (const char* name : {"gm6", "gm6p"}) {
        auto a = node_address(name);
        text += (a.ok() ? *a : "error: " + a.status().message()) + "\n";
      }
    }
    (void)!write(out[1], text.data(), text.size());
    _exit(0);
  }
  close(out[1]);
  std::string got;
  char buf[256];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (got == "setup failed") GTEST_SKIP() << "cannot make a veth in a network namespace here";
  const size_t nl = got.find('\n');
  ASSERT_NE(nl, std::string::npos) << got;
  const std::string gm6 = got.substr(0, nl), gm6p = got.substr(nl + 1);
  // Either ULA address (getifaddrs lists them newest first).
  EXPECT_TRUE(gm6 == "fd00:6d67::11" || gm6 == "fd00:6d67::12") << gm6;
  EXPECT_EQ(gm6p, "error: dw_network: interface 'gm6p' has no IPv4 address and no IPv6 address other than "
                  "link-local on this node\n");
}

TEST(CompanionJobTest, EnvValue) {
  std::vector<std::string> env = {"A=1", "AB=2", "C="};
  EXPECT_EQ(env_value(env, "A"), "1");
  EXPECT_EQ(env_value(env, "AB"), "2");
  EXPECT_EQ(env_value(env, "C"), "");
  EXPECT_EQ(env_value(env, "D"), "");
}

}  // namespace
}  // namespace goldminer
