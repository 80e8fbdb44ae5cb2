// A trainer whose reserved port another process took first, end to end
// (launch/trainer_rendezvous.h), part of tests/dataplane_test: the real
// goldminer-consume and goldminer-dw, with squeue and scontrol replaced on
// the PATH by scripts that keep "the job's Comment" in a file (what
// slurmctld would keep). The stranger is another goldminer-consume, of
// another job secret, on the port. What each injects and checks is said at
// each test.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "gm_config.h"
#include "tw_lib/session/dataplane_test_util.h"

namespace goldminer {
namespace {

using namespace testing;  // NOLINT(build/namespaces)

constexpr const char* kJob = "4242";

// squeue -o %k prints the Comment file ("(null)" when none), scontrol
// update JobId=4242 Comment=X writes X there unless `scontrol_fails`.
void fake_slurm(const TempDir& d, bool scontrol_fails = false) {
  const std::string comment = d / "comment";
  std::ofstream(d / "squeue") << "#!/bin/sh\n"
                              << "echo \"$*\" >>" << (d / "squeue.calls") << "\n"
                              << "if [ -s " << comment << " ]; then cat " << comment << "; echo; else echo '(null)'; fi\n";
  std::ofstream(d / "scontrol") << "#!/bin/sh\n"
                                << (scontrol_fails ? "echo 'slurm_update error: Access/permission denied' >&2; exit 1\n"
                                                   : "")
                                << "[ \"$2\" = JobId=" << kJob << " ] || exit 2\n"
                                << "printf '%s' \"${3#Comment=}\" >" << comment << "\n";
  chmod((d / "squeue").c_str(), 0755);
  chmod((d / "scontrol").c_str(), 0755);
}

std::map<std::string, std::string> job_env(const TempDir& d, int port) {
  auto env = kEnv;
  env["PATH"] = (d / "") + ":/usr/bin:/bin";
  env["SLURM_JOB_ID"] = kJob;
  env["GOLDMINER_AUTH_JOB"] = kJob;
  env["GOLDMINER_LISTEN"] = "ucx://127.0.0.1:" + std::to_string(port);
  return env;
}

// Another job's trainer (its own secret) listening on `port`; returns once
// it listens there.
std::unique_ptr<Process> stranger_on(int port, const TempDir& d) {
  auto env = kEnv;
  env["GOLDMINER_SECRET"] = "another-jobs-secret";
  auto p = std::make_unique<Process>(
      consume_args({"-v", "--input", "text:" + (d / "stranger.txt"), "--listen",
                    "ucx://127.0.0.1:" + std::to_string(port), "--workers", "0", "--min-workers", "1",
                    "--join-timeout", "120"}),
      env);
  for (int i = 0; i < 500 && p->err().find("listening on") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(p->err().find("listening on"), std::string::npos) << p->err();
  return p;
}

// Injects: another job's goldminer-consume on the port the job's trainer
// was to listen on (GOLDMINER_LISTEN), before the trainer starts; a
// worker told that port (GOLDMINER_TRAINER) with --trainer-job. Checks:
// the trainer listens on another port, names the taken one and its uid,
// and writes its address into the job's Comment beside the user's text;
// the worker finds the stranger does not prove the job, reads the Comment
// and joins the trainer; the epoch is exactly once.
TEST(PortTakenTest, ATrainerWhosePortWasTakenGetsItsWorkersThroughTheJobsComment) {
#ifndef GOLDMINER_HAVE_UCX
  GTEST_SKIP() << "built without UCX";
#endif
  TempDir d;
  fake_slurm(d);
  std::ofstream(d / "comment") << "sweep run 7";
  write_text(d / "in.txt", 3000);
  write_text(d / "stranger.txt", 10);
  const int port = free_port();
  auto stranger = stranger_on(port, d);
  auto env = job_env(d, port);
  Process trainer(consume_args({"-v", "--input", "text:" + (d / "in.txt"), "--batch-size", "100", "--epochs", "1",
                                "--workers", "0", "--min-workers", "1", "--join-timeout", "60"}),
                  env);
  auto wenv = env;
  wenv["GOLDMINER_TRAINER"] = env["GOLDMINER_LISTEN"];
  Process worker({builddir() + "/goldminer-dw", "-v", "--trainer-job", kJob, "--connect-timeout", "60"}, wenv);
  EXPECT_EQ(trainer.wait(), 0) << trainer.err();
  EXPECT_EQ(worker.wait(), 0) << worker.err();
  const std::string port_text = std::to_string(port);
  EXPECT_NE(trainer.err().find("port " + port_text + " of 127.0.0.1 is taken (listened on by uid " +
                               std::to_string(getuid()) + "): listening at ucx://127.0.0.1:"),
            std::string::npos)
      << trainer.err();
  std::string comment;
  std::getline(std::ifstream(d / "comment"), comment);
  std::smatch m;
  ASSERT_TRUE(std::regex_match(comment, m, std::regex("sweep run 7 goldminer-trainer=ucx://127\\.0\\.0\\.1:([0-9]+)")))
      << comment;
  EXPECT_NE(m[1].str(), port_text);
  EXPECT_NE(worker.err().find("the process at ucx://127.0.0.1:" + port_text + " did not prove the job"),
            std::string::npos)
      << worker.err();
  EXPECT_NE(worker.err().find("the trainer published that it listens at ucx://127.0.0.1:" + m[1].str()),
            std::string::npos)
      << worker.err();
  auto epochs = parse_json_lines(trainer.out());
  ASSERT_EQ(epochs.size(), 1u) << trainer.out();
  EXPECT_EQ(epochs[0].v["unique_samples"], 3000);
  EXPECT_EQ(epochs[0].v["duplicates"], 0);
  EXPECT_EQ(epochs[0].v["missing"], 0);
  EXPECT_EQ(stranger->err().find("joined"), std::string::npos) << "the worker served the stranger: " << stranger->err();
}

// Injects: the same stranger, and a Comment the trainer cannot write
// (scontrol refused), or a worker whose trainer never publishes. Checks:
// the trainer fails at once naming the port and the refusal; the worker
// gives up after --rediscover-timeout naming the stranger's failed proof.
TEST(PortTakenTest, AnAddressThatCannotBePublishedOrIsNeverFoundFailsNamingTheCause) {
#ifndef GOLDMINER_HAVE_UCX
  GTEST_SKIP() << "built without UCX";
#endif
  TempDir d;
  fake_slurm(d, /*scontrol_fails=*/true);
  write_text(d / "in.txt", 100);
  write_text(d / "stranger.txt", 10);
  const int port = free_port();
  auto stranger = stranger_on(port, d);
  auto env = job_env(d, port);
  const auto t0 = std::chrono::steady_clock::now();
  Process trainer(consume_args({"--input", "text:" + (d / "in.txt"), "--workers", "0"}), env);
  EXPECT_NE(trainer.wait(), 0);
  EXPECT_NE(trainer.err().find("port " + std::to_string(port) + " of 127.0.0.1 is taken"), std::string::npos)
      << trainer.err();
  EXPECT_NE(trainer.err().find("which the job's workers cannot learn: scontrol update JobId=4242 Comment=...: exit 1"),
            std::string::npos)
      << trainer.err();
  EXPECT_NE(trainer.err().find("Access/permission denied"), std::string::npos) << trainer.err();

  auto wenv = env;
  wenv["GOLDMINER_TRAINER"] = env["GOLDMINER_LISTEN"];
  Process worker({builddir() + "/goldminer-dw", "--trainer-job", kJob, "--connect-timeout", "60",
                  "--rediscover-timeout", "3"},
                 wenv);
  EXPECT_EQ(worker.wait(), 1) << worker.err();
  EXPECT_NE(worker.err().find("did not prove the job (authentication: the trainer does not prove this job's secret"),
            std::string::npos)
      << worker.err();
  EXPECT_NE(worker.err().find("and the trainer published no other address within 3 s"), std::string::npos)
      << worker.err();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30)) << "both within 30 s";
}

// Injects: strangers (other jobs' trainers) on the port rank 0 of a
// two-rank srun step was to listen on and on the one reserved for rank 1
// (GOLDMINER_RANK_LISTEN). Checks: both ranks listen elsewhere, rank 0
// publishing, rank 1 telling rank 0 when it joins (after reading where
// rank 0 is); two workers sent to the old address join and are shared;
// together the ranks take every sample once.
TEST(PortTakenTest, RanksWhosePortsWereTakenFindEachOtherAndShareTheWorkers) {
#ifndef GOLDMINER_HAVE_UCX
  GTEST_SKIP() << "built without UCX";
#endif
  TempDir d;
  fake_slurm(d);
  write_text(d / "in.txt", 4000);
  write_text(d / "stranger.txt", 10);
  const int port = free_port(), rank1_port = free_port();
  auto stranger = stranger_on(port, d);
  auto stranger1 = stranger_on(rank1_port, d);
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 2; ++r) {
    auto env = job_env(d, port);
    env["SLURM_PROCID"] = std::to_string(r);
    env["SLURM_STEP_NUM_TASKS"] = "2";
    if (r == 1) env["GOLDMINER_RANK_LISTEN"] = "ucx://127.0.0.1:" + std::to_string(rank1_port);
    ranks.push_back(std::make_unique<Process>(
        consume_args({"-v", "--input", "text:" + (d / "in.txt"), "--batch-size", "50", "--epochs", "1",
                      "--workers", "0", "--first-worker-timeout", "30"}),
        env));
  }
  std::vector<std::unique_ptr<Process>> workers;
  auto wenv = job_env(d, port);
  wenv["GOLDMINER_TRAINER"] = wenv["GOLDMINER_LISTEN"];
  for (int i = 0; i < 2; ++i)
    workers.push_back(std::make_unique<Process>(
        std::vector<std::string>{builddir() + "/goldminer-dw", "-v", "--trainer-job", kJob, "--connect-timeout", "60"},
        wenv));
  const int rc0 = ranks[0]->wait(), rc1 = ranks[1]->wait();
  for (auto& w : workers) EXPECT_EQ(w->wait(), 0) << w->err();
  ASSERT_EQ(rc0, 0) << ranks[0]->err();
  ASSERT_EQ(rc1, 0) << ranks[1]->err();
  const std::string e0 = ranks[0]->err(), e1 = ranks[1]->err();
  EXPECT_NE(e0.find("port " + std::to_string(port) + " of 127.0.0.1 is taken"), std::string::npos) << e0;
  EXPECT_NE(e0.find("published in the job's Comment"), std::string::npos) << e0;
  EXPECT_NE(e1.find("port " + std::to_string(rank1_port) + " of 127.0.0.1 is taken"), std::string::npos) << e1;
  EXPECT_NE(e1.find("instead (rank 0 learns it)"), std::string::npos) << e1;
  EXPECT_NE(e1.find("rank 0 published that it listens at ucx://127.0.0.1:"), std::string::npos) << e1;
  double unique = 0, duplicates = 0;
  for (auto& r : ranks)
    for (auto& e : parse_json_lines(r->out())) {
      unique += e.v["unique_samples"];
      duplicates += e.v["duplicates"];
    }
  EXPECT_EQ(unique, 4000) << ranks[0]->out() << ranks[1]->out();
  EXPECT_EQ(duplicates, 0);
}

// Whether some process listens on TCP `port` (/proc/net/tcp and tcp6,
// state 0A).
bool someone_listens_on(int port) {
  char hex[8];
  std::snprintf(hex, sizeof hex, ":%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string slot, local, remote, state, rest;
    std::getline(in, rest);
    while (in >> slot >> local >> remote >> state && std::getline(in, rest))
      if (state == "0A" && local.size() > 5 && local.substr(local.size() - 5) == hex) return true;
  }
  return false;
}

// Injects: the port the SPANK plugin reserved for the trainer's UCX
// (GOLDMINER_UCX_PORT, under firewall=nftables); then a value that is no
// port. Checks: while the trainer waits for its worker, something listens
// on that port (nothing did before), a worker joins and the epoch is
// exactly once; the bad value fails the trainer naming the variable.
TEST(TrainerPortsTest, TheTrainersUcxListensOnThePortReservedForIt) {
#ifndef GOLDMINER_HAVE_UCX
  GTEST_SKIP() << "built without UCX";
#endif
  TempDir d;
  fake_slurm(d);
  write_text(d / "in.txt", 2000);
  const int port = free_port(), ucx_port = free_port();
  ASSERT_FALSE(someone_listens_on(ucx_port));
  auto env = job_env(d, port);
  env["GOLDMINER_UCX_PORT"] = std::to_string(ucx_port);
  Process trainer(consume_args({"-v", "--input", "text:" + (d / "in.txt"), "--batch-size", "50", "--workers", "0",
                                "--min-workers", "1", "--join-timeout", "60"}),
                  env);
  for (int i = 0; i < 500 && trainer.err().find("listening on") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(someone_listens_on(ucx_port)) << trainer.err();
  auto wenv = job_env(d, port);
  wenv["GOLDMINER_TRAINER"] = wenv["GOLDMINER_LISTEN"];
  Process worker({builddir() + "/goldminer-dw", "--connect-timeout", "60"}, wenv);
  ASSERT_EQ(trainer.wait(), 0) << trainer.err();
  EXPECT_EQ(worker.wait(), 0) << worker.err();
  expect_clean(parse_json_lines(trainer.out()), 1, 2000);
  env["GOLDMINER_UCX_PORT"] = "70000";
  Process bad(consume_args({"--input", "text:" + (d / "in.txt")}), env);
  EXPECT_NE(bad.wait(), 0);
  EXPECT_NE(bad.err().find("GOLDMINER_UCX_PORT: invalid value '70000': expected an integer from 1 to 65535"),
            std::string::npos)
      << bad.err();
}

}  // namespace
}  // namespace goldminer
