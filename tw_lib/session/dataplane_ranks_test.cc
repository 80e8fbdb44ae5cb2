// Data-parallel ranks end to end: goldminer-consume as ranks 0 and 1 of 2
// over the same input: each epoch the ranks read every sample once between
// them and take the same number of batches, through kill -9 of a rank's
// workers and a restart of one rank from its saved position.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tw_lib/session/dataplane_test_util.h"

namespace goldminer {
namespace {

// Temp folders, input files, goldminer-consume processes and their --json
// epoch lines: the data plane's test helpers.
using namespace testing;  // NOLINT(build/namespaces)

// The id_sum of each epoch line (exact: a double would round it).
std::vector<uint64_t> id_sums(const std::string& out) {
  std::vector<uint64_t> sums;
  const std::regex re("\"id_sum\": ([0-9]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    sums.push_back(std::stoull((*it)[1]));
  return sums;
}

// The id sum of the samples a --state-out file lists as seen ("seen
// FILE:RECORD ..."; one file here).
uint64_t seen_sum(const std::string& state) {
  uint64_t sum = 0;
  const std::regex re(" 0:([0-9]+)");
  const std::string seen = state.substr(state.find("seen"));
  for (auto it = std::sregex_iterator(seen.begin(), seen.end(), re); it != std::sregex_iterator(); ++it)
    sum += std::stoull((*it)[1]);
  return sum;
}

std::unique_ptr<Process> rank_process(const std::vector<std::string>& common, int rank,
                                      const std::vector<std::string>& more = {}) {
  std::vector<std::string> args = common;
  args.insert(args.end(), {"--rank", std::to_string(rank), "--world-size", "2"});
  args.insert(args.end(), more.begin(), more.end());
  return std::make_unique<Process>(consume_args(args), kEnv);
}

// Per epoch: no rank has a duplicate or misses one of its samples, their
// samples add up to `total` and their id sums to total(total-1)/2, and both
// took the same number of batches.
void expect_exact_cover(Process* r0, Process* r1, size_t epochs, uint64_t total) {
  const std::vector<Epoch> a = parse_json_lines(r0->out()), b = parse_json_lines(r1->out());
  const std::vector<uint64_t> sa = id_sums(r0->out()), sb = id_sums(r1->out());
  ASSERT_EQ(a.size(), epochs) << r0->err();
  ASSERT_EQ(b.size(), epochs) << r1->err();
  ASSERT_EQ(sa.size(), epochs);
  ASSERT_EQ(sb.size(), epochs);
  for (size_t e = 0; e < epochs; ++e) {
    SCOPED_TRACE("epoch " + std::to_string(e));
    EXPECT_EQ(a[e].v.at("rank"), 0);
    EXPECT_EQ(b[e].v.at("rank"), 1);
    EXPECT_EQ(a[e].v.at("world_size"), 2);
    for (const Epoch* x : {&a[e], &b[e]}) {
      EXPECT_EQ(x->v.at("duplicates"), 0);
      EXPECT_EQ(x->v.at("missing"), 0);
    }
    EXPECT_EQ(a[e].v.at("batches"), b[e].v.at("batches"));
    EXPECT_EQ(a[e].v.at("samples") + b[e].v.at("samples"), static_cast<double>(total));
    EXPECT_EQ(sa[e] + sb[e], total * (total - 1) / 2);
  }
}

TEST(DataplaneRanksTest, TwoRanksReadEverySampleOnceWithTheSameBatchCount) {
  TempDir d;
  write_text(d / "a.txt", 5000);
  write_text(d / "b.txt", 777);
  for (const char* order : {"", "--deterministic"}) {
    SCOPED_TRACE(order);
    std::vector<std::string> common = {"--input", "text:" + (d / "a.txt") + "," + (d / "b.txt"), "--batch-size",
                                       "50", "--records-per-split", "700", "--epochs", "3", "--workers", "2",
                                       "--seed", "9", "--shuffle-buffer", "64"};
    if (*order) common.push_back(order);
    auto r0 = rank_process(common, 0), r1 = rank_process(common, 1);
    ASSERT_EQ(r0->wait(), 0) << r0->err();
    ASSERT_EQ(r1->wait(), 0) << r1->err();
    expect_exact_cover(r0.get(), r1.get(), 3, 5777);
    // The ranks' parts are dealt anew each epoch.
    const auto a = parse_json_lines(r0->out());
    EXPECT_NE(id_sums(r0->out())[0], id_sums(r0->out())[1]);
    EXPECT_NE(a[0].text.at("order_digest"), a[1].text.at("order_digest"));
  }
}

// drop_last: the same batch count, no sample twice, at most one batch's
// worth of splits left out per rank; the environment gives the rank where
// the options do not (torchrun's RANK and WORLD_SIZE).
TEST(DataplaneRanksTest, DropLastAndRanksFromTheEnvironment) {
  TempDir d;
  write_text(d / "a.txt", 1001);
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 2; ++r) {
    auto env = kEnv;
    env["RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = "2";
    ranks.push_back(std::make_unique<Process>(
        consume_args({"--input", "text:" + (d / "a.txt"), "--batch-size", "100", "--records-per-split", "300",
                      "--drop-last"}),
        env));
  }
  for (auto& p : ranks) ASSERT_EQ(p->wait(), 0) << p->err();
  const auto a = parse_json_lines(ranks[0]->out()), b = parse_json_lines(ranks[1]->out());
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].v.at("rank"), 0);
  EXPECT_EQ(b[0].v.at("rank"), 1);
  EXPECT_EQ(a[0].v.at("batches"), b[0].v.at("batches"));
  EXPECT_EQ(a[0].v.at("missing") + b[0].v.at("missing"), 0);
  EXPECT_EQ(a[0].v.at("duplicates") + b[0].v.at("duplicates"), 0);
  // 501 and 500 records, in parts that end where splits do: what a rank
  // leaves out is whole batches of its last parts.
  EXPECT_LE(a[0].v.at("samples") + b[0].v.at("samples"), 1001);
  EXPECT_LE(a[0].v.at("samples"), 501);
  EXPECT_LE(b[0].v.at("samples"), 500);
  EXPECT_EQ(id_sums(ranks[0]->out()).size(), 1u);
}

// pad: 1001 records on 2 ranks: each reads 501, rank 1 one of rank 0's
// again; --pad with --drop-last is refused.
TEST(DataplaneRanksTest, PadGivesEveryRankAsManyRecords) {
  TempDir d;
  write_text(d / "a.txt", 1001);
  const std::vector<std::string> common = {"--input", "text:" + (d / "a.txt"), "--batch-size", "100",
                                           "--records-per-split", "300", "--pad"};
  auto r0 = rank_process(common, 0), r1 = rank_process(common, 1);
  ASSERT_EQ(r0->wait(), 0) << r0->err();
  ASSERT_EQ(r1->wait(), 0) << r1->err();
  const auto a = parse_json_lines(r0->out()), b = parse_json_lines(r1->out());
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].v.at("samples"), 501);
  EXPECT_EQ(b[0].v.at("samples"), 501);
  EXPECT_EQ(a[0].v.at("batches"), b[0].v.at("batches"));
  for (const auto* e : {&a[0], &b[0]}) {
    EXPECT_EQ(e->v.at("duplicates"), 0);
    EXPECT_EQ(e->v.at("missing"), 0);
  }
  auto both = rank_process(common, 0, {"--drop-last"});
  EXPECT_EQ(both->wait(), 1);
  EXPECT_NE(both->err().find("drop_last and pad: one at most"), std::string::npos) << both->err();
}

// kill -9 of one of rank 1's workers mid-epoch, and a drain (SIGTERM) of
// one of rank 0's, change nothing: their parts are re-run by the ranks'
// other workers.
TEST(DataplaneRanksTest, AKilledAndADrainedWorkerLoseAndDuplicateNothing) {
  TempDir d;
  write_text(d / "big.txt", 200000);
  const std::vector<std::string> common = {"--input", "text:" + (d / "big.txt"), "--batch-size", "64",
                                           "--records-per-split", "2000", "--epochs", "30", "--workers", "2",
                                           "--queue-batches", "8", "--seed", "4"};
  auto r0 = rank_process(common, 0), r1 = rank_process(common, 1);
  // Kill a worker of rank 1 once both of them run (30 epochs: about 5 s
  // here; killed mid-run).
  std::vector<pid_t> pids;
  for (int i = 0; i < 500 && pids.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pids = worker_pids(r1.get());
  }
  ASSERT_EQ(pids.size(), 2u) << r1->err();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  ASSERT_EQ(kill(pids[0], SIGKILL), 0);
  EXPECT_TRUE(parse_json_lines(r1->out()).size() < 30) << "killed before the end";
  const std::vector<pid_t> rank0_pids = worker_pids(r0.get());
  ASSERT_EQ(rank0_pids.size(), 2u) << r0->err();
  ASSERT_EQ(kill(rank0_pids[0], SIGTERM), 0);
  EXPECT_TRUE(parse_json_lines(r0->out()).size() < 30) << "drained before the end";
  ASSERT_EQ(r0->wait(), 0) << r0->err();
  ASSERT_EQ(r1->wait(), 0) << r1->err();
  expect_exact_cover(r0.get(), r1.get(), 30, 200000);
  double lost = 0;
  for (const Epoch& e : parse_json_lines(r1->out())) lost += e.v.at("workers_lost");
  std::cerr << "rank 1: workers lost with splits in hand: " << lost << "\n";
}

// Rank 1 stopped mid-epoch and restarted from its position reads exactly
// the rest of its share; rank 0's position is refused by rank 1.
TEST(DataplaneRanksTest, OneRankRestartsFromItsPosition) {
  TempDir d;
  write_text(d / "a.txt", 6000);
  const std::vector<std::string> common = {"--input", "text:" + (d / "a.txt"), "--batch-size", "40",
                                           "--records-per-split", "500", "--workers", "2", "--seed", "2",
                                           "--shuffle-buffer", "100"};
  auto r0 = rank_process(common, 0), first = rank_process(common, 1, {"--stop-after-batches", "30", "--state-out",
                                                                          d / "rank1.state"});
  ASSERT_EQ(r0->wait(), 0) << r0->err();
  ASSERT_EQ(first->wait(), 3) << first->err();
  auto second = rank_process(common, 1, {"--resume", d / "rank1.state"});
  ASSERT_EQ(second->wait(), 0) << second->err();
  const auto a = parse_json_lines(r0->out()), b = parse_json_lines(second->out());
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].v.at("duplicates"), 0);
  EXPECT_EQ(b[0].v.at("missing"), 0);
  std::ifstream st(d / "rank1.state");
  std::string state((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
  const std::string seen_line = state.substr(state.find("seen"));
  const auto seen = std::count(seen_line.begin(), seen_line.end(), ':');
  EXPECT_GT(seen, 30 * 20);
  EXPECT_EQ(a[0].v.at("samples") + b[0].v.at("samples") + static_cast<double>(seen), 6000);
  EXPECT_EQ(id_sums(r0->out())[0] + id_sums(second->out())[0] + seen_sum(state), 6000u * 5999 / 2);
  EXPECT_EQ(a[0].v.at("batches"), b[0].v.at("batches") + 30) << "the same count as rank 0, before and after";
  auto wrong = std::make_unique<Process>(
      consume_args({"--input", "text:" + (d / "a.txt"), "--batch-size", "40", "--records-per-split", "500",
                    "--workers", "1", "--seed", "2", "--shuffle-buffer", "100", "--rank", "0", "--world-size", "2",
                    "--resume", d / "rank1.state"}),
      kEnv);
  EXPECT_EQ(wrong->wait(), 1);
  EXPECT_NE(wrong->err().find("shuffle buffer or rank differ"), std::string::npos) << wrong->err();
}

// The ranks share the workers that connect to rank 0 (--rank0): rank 0
// keeps half and sends the others to rank 1; every epoch is exact on both,
// and a worker rank 0 sent to rank 1, killed mid-run, changes nothing.
TEST(DataplaneRanksTest, RanksShareTheWorkersThatConnectToRankZero) {
  TempDir d;
  write_text(d / "big.txt", 200000);
  const int port = testing::free_port();
  ASSERT_GT(port, 0);
  const std::string rank0 = "ucx://127.0.0.1:" + std::to_string(port);
  const std::vector<std::string> common = {"--input", "text:" + (d / "big.txt"), "--batch-size", "64",
                                           "--records-per-split", "2000", "--epochs", "20", "--workers", "0",
                                           "--queue-batches", "8", "--seed", "6", "--rank0", rank0,
                                           "--first-worker-timeout", "90", "-v"};
  auto r0 = rank_process(common, 0), r1 = rank_process(common, 1);
  std::vector<std::unique_ptr<Process>> workers;
  auto env = kEnv;
  env["GOLDMINER_TRAINER"] = rank0;
  for (int i = 0; i < 4; ++i)
    workers.push_back(
        std::make_unique<Process>(std::vector<std::string>{testing::builddir() + "/goldminer-dw", "-v"}, env));
  // A worker sent to rank 1, once it streams there.
  pid_t sent = 0;
  for (int i = 0; i < 1500 && sent == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (auto& w : workers)
      if (w->err().find("sends this worker to rank") != std::string::npos &&
          r1->err().find("delivered its first batch") != std::string::npos)
        sent = w->pid();
  }
  ASSERT_NE(sent, 0) << r0->err() << r1->err();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(kill(sent, SIGKILL), 0);
  EXPECT_TRUE(parse_json_lines(r1->out()).size() < 20) << "killed before the end";
  ASSERT_EQ(r0->wait(), 0) << r0->err();
  ASSERT_EQ(r1->wait(), 0) << r1->err();
  expect_exact_cover(r0.get(), r1.get(), 20, 200000);
  const std::string e0 = r0->err(), e1 = r1->err();
  EXPECT_NE(e0.find("rank 1 joined, listening on ucx://127.0.0.1:"), std::string::npos) << e0;
  EXPECT_NE(e0.find("sent to rank 1 at ucx://127.0.0.1:"), std::string::npos) << e0;
  EXPECT_NE(e1.find("rank 1 joined rank 0 at " + rank0), std::string::npos) << e1;
  EXPECT_NE(e1.find("splits re-leased"), std::string::npos) << "the kill hit rank 1's worker with splits: " << e1;
  for (auto& w : workers) w->wait();
}

TEST(DataplaneRanksTest, BadRanksAreClearErrors) {
  TempDir d;
  write_text(d / "a.txt", 10);
  expect_refused(consume_args({"--input", "text:" + (d / "a.txt"), "--rank", "2", "--world-size", "2"}), kEnv,
                 "--rank: 2 is not a rank of world size 2 (ranks are 0..1)");
  auto env = kEnv;
  env["RANK"] = "3";
  env["WORLD_SIZE"] = "2";
  expect_refused(consume_args({"--input", "text:" + (d / "a.txt")}), env, "RANK=3 is not a rank of WORLD_SIZE=2");
  // goldminer-consume over a.txt in the environment `env`: its one epoch
  // line; none where it failed or printed another number of them.
  const auto one_epoch = [&d](const std::map<std::string, std::string>& env) -> std::optional<Epoch> {
    Process p(consume_args({"--input", "text:" + (d / "a.txt")}), env);
    const int status = p.wait();
    EXPECT_EQ(status, 0) << p.err();
    const auto epochs = parse_json_lines(p.out());
    EXPECT_EQ(epochs.size(), 1u) << p.out();
    if (status != 0 || epochs.size() != 1) return std::nullopt;
    return epochs[0];
  };
  // A heterogeneous job's step numbers the tasks of all its components:
  // no ranks from Slurm there.
  env.erase("RANK");
  env.erase("WORLD_SIZE");
  env["SLURM_PROCID"] = "1";
  env["SLURM_STEP_NUM_TASKS"] = "3";
  const auto in_step = one_epoch(env);
  ASSERT_TRUE(in_step);
  EXPECT_EQ(in_step->v.at("rank"), 1);
  EXPECT_EQ(in_step->v.at("world_size"), 3);
  env["SLURM_HET_SIZE"] = "2";
  const auto in_het = one_epoch(env);
  ASSERT_TRUE(in_het);
  EXPECT_EQ(in_het->v.at("world_size"), 1);
  EXPECT_EQ(in_het->v.at("samples"), 10);
  env["RANK"] = "x";
  env["WORLD_SIZE"] = "2";
  expect_refused(consume_args({"--input", "text:" + (d / "a.txt")}), env, "RANK: invalid value 'x': expected a count");
  // 10 records on 8 ranks with batch size 1: 2 batches on some, 1 on others.
  Process tiny(consume_args({"--input", "text:" + (d / "a.txt"), "--batch-size", "1", "--rank", "0", "--world-size",
                             "8"}),
               kEnv);
  EXPECT_EQ(tiny.wait(), 1);
  EXPECT_NE(tiny.err().find("8 ranks cannot take the same number of batches"), std::string::npos) << tiny.err();
}

}  // namespace
}  // namespace goldminer
