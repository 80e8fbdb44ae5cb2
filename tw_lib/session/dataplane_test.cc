// End-to-end tests of the data plane: the real goldminer-consume,
// goldminer-dw and goldminer-run over UCX on loopback (and local, MPI):
// every sample once per epoch, restarts from a saved position, corrupt
// records, bad inputs and options, worker programs.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "goldminer/session.h"
#include "tw_lib/session/dataplane_test_util.h"

namespace goldminer {
namespace {

using testing::builddir;
using testing::consume_args;
using testing::expect_clean;
using testing::expect_refused;
using testing::free_port;
using testing::kEnv;
using testing::parse_json_lines;
using testing::Process;
using testing::TempDir;
using testing::write_criteo;
using testing::write_text;

TEST(DataplaneTest, EveryEpochDeliversEverySampleOnceOverUcxAndLocal) {
  TempDir d;
  write_text(d / "a.txt", 5000);
  write_text(d / "b.txt", 777);
  for (const char* transport : {"ucx", "local"}) {
    Process p(consume_args({"--input", "text:" + (d / "a.txt") + "," + (d / "b.txt"), "--batch-size", "50",
                            "--epochs", "3", "--workers", "2", "--transport", transport, "--shuffle-buffer", "64"}),
              kEnv);
    ASSERT_EQ(p.wait(), 0) << transport << ": " << p.err();
    auto epochs = parse_json_lines(p.out());
    expect_clean(epochs, 3, 5777);
    for (const char* key : {"epoch", "samples", "unique_samples", "duplicates", "missing", "batches", "seconds",
                            "samples_per_s", "bytes_per_s", "trainer_wait_fraction", "workers_lost", "cpu_seconds"})
      EXPECT_TRUE(epochs[0].v.count(key)) << key;
    EXPECT_EQ(epochs[2].v.at("epoch"), 2);
    // Cumulative CPU time: positive (start-up alone costs some) and never
    // decreasing from one epoch to the next.
    EXPECT_GT(epochs[0].v.at("cpu_seconds"), 0) << transport;
    for (size_t i = 1; i < epochs.size(); ++i)
      EXPECT_GE(epochs[i].v.at("cpu_seconds"), epochs[i - 1].v.at("cpu_seconds")) << transport << " epoch " << i;
  }
}

// In a --goldminer batch job GOLDMINER_LISTEN says where the job's
// companion workers connect: goldminer-consume listens there unless told
// otherwise.
TEST(DataplaneTest, ConsumeListensOnGoldminerListenByDefault) {
  TempDir d;
  write_text(d / "a.txt", 500);
  const int port = free_port();
  ASSERT_GT(port, 0);
  const std::string address = "ucx://127.0.0.1:" + std::to_string(port);
  auto env = kEnv;
  env["GOLDMINER_LISTEN"] = address;
  Process p(consume_args({"--input", "text:" + (d / "a.txt"), "--batch-size", "50", "--workers", "1"}), env);
  ASSERT_EQ(p.wait(), 0) << p.err();
  expect_clean(parse_json_lines(p.out()), 1, 500);
  EXPECT_NE(p.err().find("listening on " + address + "\n"), std::string::npos) << p.err();
  Process given(consume_args({"--input", "text:" + (d / "a.txt"), "--batch-size", "50", "--workers", "1", "--listen",
                              "ucx://127.0.0.1:0"}),
                env);
  ASSERT_EQ(given.wait(), 0) << given.err();
  EXPECT_EQ(given.err().find("listening on " + address), std::string::npos) << given.err();
}

// --numa-node and --pin-memory: the JSON says where batches were received;
// pinning without a GPU warns and stays pageable; a node that does not
// exist and a bad value are errors naming them.
TEST(DataplaneTest, ConsumeSaysWhereItReceivesBatches) {
  TempDir d;
  write_text(d / "a.txt", 200);
  const std::vector<std::string> base = {"--input", "text:" + (d / "a.txt"), "--batch-size", "50", "--workers", "1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return consume_args(args);
  };
  Process none(with({"--numa-node", "none"}), kEnv);
  ASSERT_EQ(none.wait(), 0) << none.err();
  auto epochs = parse_json_lines(none.out());
  expect_clean(epochs, 1, 200);
  EXPECT_EQ(epochs[0].text.at("receive_memory"), "pageable");
  Process node0(with({"--numa-node", "0", "--pin-memory"}), kEnv);
  ASSERT_EQ(node0.wait(), 0) << node0.err();
  epochs = parse_json_lines(node0.out());
  expect_clean(epochs, 1, 200);
  const std::string where = epochs[0].text.at("receive_memory");
  if (where.rfind("pinned", 0) != 0) {  // no GPU here: a warning, and pageable
    EXPECT_NE(node0.err().find("warning: pin_memory: "), std::string::npos) << node0.err();
  }
  EXPECT_NE(where.find(", NUMA node 0"), std::string::npos) << where;
  Process missing(with({"--numa-node", "4095"}), kEnv);
  EXPECT_EQ(missing.wait(), 1);
  EXPECT_NE(missing.err().find("numa_node 4095: this machine has NUMA node(s) "), std::string::npos) << missing.err();
  expect_refused(with({"--numa-node", "near"}), kEnv,
                 "--numa-node: invalid value 'near': expected auto, none or a node's number");
}

// A trainer stopped mid-epoch and restarted from its state gets exactly the
// samples it had not seen.
TEST(DataplaneTest, RestartFromStateDeliversExactlyTheRest) {
  TempDir d;
  write_text(d / "a.txt", 30000);
  const std::string input = "text:" + (d / "a.txt");
  Process first(consume_args({"--input", input, "--batch-size", "100", "--records-per-split", "1000", "--workers",
                              "2", "--seed", "5", "--shuffle-buffer", "300", "--stop-after-batches", "77",
                              "--state-out", d / "state"}),
                kEnv);
  ASSERT_EQ(first.wait(), 3) << first.err();
  std::ifstream st(d / "state");
  std::string state((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
  std::smatch m;
  std::string seen_line = state.substr(state.find("seen"));
  const size_t seen = std::count(seen_line.begin(), seen_line.end(), ':');
  EXPECT_EQ(seen, 7700u);
  Process second(consume_args({"--input", input, "--batch-size", "100", "--records-per-split", "1000", "--workers",
                               "2", "--seed", "5", "--shuffle-buffer", "300", "--resume", d / "state"}),
                 kEnv);
  ASSERT_EQ(second.wait(), 0) << second.err();
  auto epochs = parse_json_lines(second.out());
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_EQ(epochs[0].v.at("samples"), 30000 - 7700);
  EXPECT_EQ(epochs[0].v.at("duplicates"), 0);
  EXPECT_EQ(epochs[0].v.at("missing"), 0);
  // The position means other samples with another split size: refused.
  Process other(consume_args({"--input", input, "--batch-size", "100", "--records-per-split", "500", "--workers",
                              "1", "--seed", "5", "--shuffle-buffer", "300", "--resume", d / "state"}),
                kEnv);
  EXPECT_NE(other.wait(), 0);
  EXPECT_NE(other.err().find("another input plan"), std::string::npos) << other.err();
}

// A corrupt record is an error naming the file and the byte offset, unless
// a budget is set; then it is skipped and counted.
TEST(DataplaneTest, CorruptRecordIsAnErrorOrCountedUnderABudget) {
  TempDir d;
  write_criteo(d / "day.tsv", 3000, 1234);
  Process strict(consume_args({"--input", "criteo-tsv:" + (d / "day.tsv"), "--batch-size", "128"}), kEnv);
  EXPECT_EQ(strict.wait(), 1);
  EXPECT_NE(strict.err().find(d / "day.tsv"), std::string::npos) << strict.err();
  EXPECT_NE(strict.err().find("byte "), std::string::npos) << strict.err();
  Process lenient(
      consume_args({"--input", "criteo-tsv:" + (d / "day.tsv"), "--batch-size", "128", "--max-bad-records", "1"}),
      kEnv);
  ASSERT_EQ(lenient.wait(), 0) << lenient.err();
  auto epochs = parse_json_lines(lenient.out());
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_EQ(epochs[0].v.at("samples"), 2999);
  EXPECT_EQ(epochs[0].v.at("bad_records"), 1);
  EXPECT_EQ(epochs[0].v.at("missing"), 0);
}

// A restart keeps what was skipped before it: the resumed run neither
// counts those records missing nor gets a fresh budget.
TEST(DataplaneTest, RestartKeepsTheSkippedRecordsAndTheirBudget) {
  TempDir d;
  write_criteo(d / "day.tsv", 300, 5);
  auto run = [&](const std::vector<std::string>& more) {
    std::vector<std::string> args = {"--input", "criteo-tsv:" + (d / "day.tsv"), "--batch-size", "10",
                                     "--records-per-split", "100", "--deterministic", "--workers", "1",
                                     "--max-bad-records", "1"};
    args.insert(args.end(), more.begin(), more.end());
    return std::make_unique<Process>(consume_args(args), kEnv);
  };
  auto first = run({"--stop-after-batches", "15", "--state-out", d / "state"});
  ASSERT_EQ(first->wait(), 3) << first->err();
  std::ifstream st(d / "state");
  std::string state((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
  EXPECT_NE(state.find("\nbad_records 1\n"), std::string::npos) << state;
  auto second = run({"--resume", d / "state"});
  ASSERT_EQ(second->wait(), 0) << second->err();
  auto epochs = parse_json_lines(second->out());
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_EQ(epochs[0].v.at("missing"), 0);
  EXPECT_EQ(epochs[0].v.at("bad_records"), 1);
  // A second corrupt record, in the last split: over the budget of 1 in
  // the resumed run as in a whole one.
  {
    std::ofstream out(d / "day.tsv", std::ios::app);
    out << "0\talso-not-a-number\n";
  }
  auto whole = run({});
  EXPECT_EQ(whole->wait(), 1) << whole->err();
  auto stopped = run({"--stop-after-batches", "15", "--state-out", d / "state2"});
  ASSERT_EQ(stopped->wait(), 3) << stopped->err();
  auto resumed = run({"--resume", d / "state2"});
  EXPECT_EQ(resumed->wait(), 1) << resumed->err();
  EXPECT_NE(resumed->err().find("2 corrupt records this epoch exceed the budget of 1"), std::string::npos)
      << resumed->err();
}

TEST(DataplaneTest, BadInputsAreClearErrors) {
  Process a(consume_args({"--input", "parquet:/x"}), kEnv);
  EXPECT_EQ(a.wait(), 1);
  EXPECT_NE(a.err().find("parquet"), std::string::npos) << a.err();
  Process b(consume_args({"--input", "text:/nonexistent/file.txt"}), kEnv);
  EXPECT_EQ(b.wait(), 1);
  EXPECT_NE(b.err().find("/nonexistent/file.txt"), std::string::npos) << b.err();
  expect_refused(consume_args({"--input", "text:/etc/hostname", "--transport", "tcp"}), kEnv,
                 "--transport: invalid value 'tcp'");
  auto env = kEnv;
  env.erase("GOLDMINER_SECRET");
  expect_refused({builddir() + "/goldminer-dw", "--trainer", "ucx://127.0.0.1:1"}, env,
                 "no credential: set GOLDMINER_AUTH=munge with GOLDMINER_AUTH_JOB (as under Slurm), or "
                 "GOLDMINER_SECRET, or pass --secret-file");
  env["GOLDMINER_AUTH"] = "kerberos";
  expect_refused({builddir() + "/goldminer-dw", "--trainer", "ucx://127.0.0.1:1"}, env,
                 "GOLDMINER_AUTH: invalid value 'kerberos': expected one of munge, secret");
  env["GOLDMINER_AUTH"] = "munge";
  expect_refused({builddir() + "/goldminer-dw", "--trainer", "ucx://127.0.0.1:1"}, env,
                 "GOLDMINER_AUTH=munge needs GOLDMINER_AUTH_JOB, the trainer's job id; it is unset");
  env["GOLDMINER_AUTH_JOB"] = "12x";
  const std::string bad_job = "GOLDMINER_AUTH_JOB: invalid value '12x': expected an integer from 1 to 4294967295";
  expect_refused({builddir() + "/goldminer-dw", "--trainer", "ucx://127.0.0.1:1"}, env, bad_job);
  Process session(consume_args({"--input", "text:/etc/hostname"}), env);
  EXPECT_EQ(session.wait(), 2) << "the trainer reads the same variables";
  EXPECT_NE(session.err().find(bad_job), std::string::npos) << session.err();
}

// goldminer-dw --print-config: each option and variable it would run with
// and where it came from; the secret's value never.
TEST(DataplaneTest, WorkerPrintsItsConfigurationWithoutTheSecret) {
  auto env = kEnv;
  env["GOLDMINER_TRAINER"] = "ucx://127.0.0.1:9";
  env["GOLDMINER_DW_BIND"] = "none";
  Process dw({builddir() + "/goldminer-dw", "--print-config", "--threads", "3"}, env);
  EXPECT_EQ(dw.wait(), 0) << dw.err();
  const std::string out = dw.out();
  EXPECT_NE(out.find("--threads=3  # command line\n"), std::string::npos) << out;
  EXPECT_NE(out.find("--heartbeat=1  # default\n"), std::string::npos) << out;
  EXPECT_NE(out.find("# --trainer unset\n"), std::string::npos) << out;
  EXPECT_NE(out.find("GOLDMINER_TRAINER=ucx://127.0.0.1:9  # environment\n"), std::string::npos) << out;
  EXPECT_NE(out.find("GOLDMINER_DW_BIND=none  # environment\n"), std::string::npos) << out;
  EXPECT_NE(out.find("# GOLDMINER_SECRET set ("), std::string::npos) << out;
  EXPECT_EQ(out.find(kEnv.at("GOLDMINER_SECRET")), std::string::npos) << "the secret printed: " << out;
  env["GOLDMINER_DW_BIND"] = "all";
  expect_refused({builddir() + "/goldminer-dw", "--print-config"}, env,
                 "GOLDMINER_DW_BIND: invalid value 'all': expected one of cores, none");
  expect_refused({builddir() + "/goldminer-dw", "--print-config", "--threads", "0"}, env,
                 "--threads: invalid value '0': expected an integer from 1 to 1024");
}

// --min-workers: no batch is taken before that many workers joined (so
// every one of them joins, however short the run), or the run ends naming
// how many did.
TEST(DataplaneTest, MinWorkersWaitsForThemOrSaysHowManyJoined) {
  TempDir d;
  write_text(d / "a.txt", 300);
  Process p(consume_args({"--input", "text:" + (d / "a.txt"), "--batch-size", "50", "--workers", "3",
                          "--min-workers", "3", "-v"}),
            kEnv);
  ASSERT_EQ(p.wait(), 0) << p.err();
  expect_clean(parse_json_lines(p.out()), 1, 300);
  const std::regex joined("worker [^ ]+ joined");
  const std::string err = p.err();
  EXPECT_EQ(std::distance(std::sregex_iterator(err.begin(), err.end(), joined), std::sregex_iterator()), 3) << err;

  // 8 s: time for the one worker to start on a loaded machine (libtorch
  // and UCX take seconds there).
  Process few(consume_args({"--input", "text:" + (d / "a.txt"), "--workers", "1", "--min-workers", "2",
                            "--join-timeout", "8"}),
              kEnv);
  EXPECT_EQ(few.wait(), 1);
  EXPECT_NE(few.err().find("--min-workers: only 1 of 2 workers joined within 8 s"), std::string::npos) << few.err();
  EXPECT_TRUE(few.out().empty()) << few.out();

  expect_refused(consume_args({"--input", "text:" + (d / "a.txt"), "--join-timeout", "0"}), kEnv,
                 "--join-timeout: invalid value '0': expected an integer from 1 to 86400");
}

// The worker program runs on the workers: a TorchScript module scripted
// here by Debian's python3.
TEST(DataplaneTest, WorkerProgramRunsOnWorkers) {
  TempDir d;
  write_criteo(d / "day.tsv", 2000);
  const std::string script = d / "make.py";
  std::ofstream(script) << "import sys, torch\n"
                           "class P(torch.nn.Module):\n"
                           "    def forward(self, label, dense, sparse):\n"
                           "        x = torch.log1p(torch.nan_to_num(dense, nan=0.0).clamp(min=0))\n"
                           "        return x, torch.remainder(sparse, 1000), label\n"
                           "torch.jit.save(torch.jit.script(P()), sys.argv[1])\n";
  const char* py = std::getenv("PYTHON");
  const std::string cmd = std::string(py ? py : "/usr/bin/python3") + " " + script + " " + (d / "p.pt") + " 2>&1";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "python3 with torch could not script the program: " << cmd;
  for (const char* transport : {"ucx", "local"}) {
    Process p(consume_args({"--input", "criteo-tsv:" + (d / "day.tsv"), "--batch-size", "100", "--program",
                            d / "p.pt", "--workers", "2", "--transport", transport}),
              kEnv);
    ASSERT_EQ(p.wait(), 0) << transport << ": " << p.err();
    expect_clean(parse_json_lines(p.out()), 1, 2000);
  }
  Process bad(consume_args({"--input", "criteo-tsv:" + (d / "day.tsv"), "--program", script}), kEnv);
  EXPECT_EQ(bad.wait(), 1);
  EXPECT_NE(bad.err().find("not a loadable TorchScript module"), std::string::npos) << bad.err();
  auto env = kEnv;
  env["GOLDMINER_DW_PROGRAM"] = "/nonexistent/goldminer-dw";
  Process no_dw(consume_args({"--input", "criteo-tsv:" + (d / "day.tsv")}), env);
  EXPECT_EQ(no_dw.wait(), 1);
  EXPECT_NE(no_dw.err().find("every worker exited and none is connected"), std::string::npos) << no_dw.err();
}

TEST(DataplaneTest, MpiTransportWithStaticWorkers) {
  if (system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun not found (openmpi-bin)";
  TempDir d;
  write_text(d / "a.txt", 20000);
  Process p(consume_args({"--input", "text:" + (d / "a.txt"), "--batch-size", "100", "--epochs", "2", "--workers",
                          "2", "--transport", "mpi"}),
            kEnv);
  ASSERT_EQ(p.wait(), 0) << p.err();
  expect_clean(parse_json_lines(p.out()), 2, 20000);
}

// The trainer of GoldminerRunStartsWorkersForATrainer: this binary re-run
// by goldminer-run with GM_TEST_TRAINER_INPUT set. Counts one epoch.
const bool trainer_process = [] {
  const char* input = std::getenv("GM_TEST_TRAINER_INPUT");
  if (input == nullptr) return false;
  SessionOptions o;
  o.input = input;
  o.batch_size = 32;
  Status env = o.from_environment();
  if (!env.ok()) {
    std::fprintf(stderr, "trainer: %s\n", env.message().c_str());
    std::_Exit(2);
  }
  auto s = Session::create(o);
  if (!s.ok()) {
    std::fprintf(stderr, "trainer: %s\n", s.status().message().c_str());
    std::_Exit(3);
  }
  std::set<int64_t> seen;
  uint64_t samples = 0;
  for (;;) {
    auto b = (*s)->next();
    if (!b.ok()) std::_Exit(4);
    if (!b->has_value()) break;
    for (uint32_t i = 0; i < (*b)->samples; ++i) seen.insert((*b)->sample_ids[2 * i + 1]);
    samples += (*b)->samples;
  }
  std::printf("trainer: %llu samples, %zu unique, listen %s, workers %zu\n", static_cast<unsigned long long>(samples),
              seen.size(), (*s)->address().c_str(), (*s)->metrics().workers);
  std::fflush(stdout);
  s->reset();
  std::_Exit(0);
}();

TEST(DataplaneTest, GoldminerRunStartsWorkersForATrainer) {
  TempDir d;
  write_text(d / "t.txt", 3000);
  for (const char* transport : {"ucx", "local"}) {
    auto env = kEnv;
    env.erase("GOLDMINER_SECRET");  // goldminer-run makes one
    env["GM_TEST_TRAINER_INPUT"] = "text:" + (d / "t.txt");
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ASSERT_GT(n, 0);
    Process p({builddir() + "/goldminer-run", "--workers", "2", "--transport", transport, "--",
               std::string(self, static_cast<size_t>(n))},
              env);
    ASSERT_EQ(p.wait(), 0) << transport << ": " << p.err();
    EXPECT_NE(p.out().find("trainer: 3000 samples, 3000 unique"), std::string::npos) << p.out();
    EXPECT_NE(p.out().find(std::string("listen ") + transport + "://"), std::string::npos) << p.out();
  }
  expect_refused({builddir() + "/goldminer-run", "--workers", "1"}, kEnv, "no command");
  // -1 would be read as 4294967295 workers: refused before any starts.
  expect_refused({builddir() + "/goldminer-run", "--workers=-1", "--", "true"}, kEnv,
                 "--workers: invalid value '-1': expected an integer from 0 to 1024");
  expect_refused({builddir() + "/goldminer-run", "--threads", "0", "--", "true"}, kEnv,
                 "--threads: invalid value '0': expected an integer from 1 to 1024");
}

}  // namespace
}  // namespace goldminer
