// Tests of the session's record of its connections and their credits
// (tw_lib/session/worker_table.h), alone.
#include "tw_lib/session/worker_table.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace goldminer {
namespace {

using Grants = std::vector<std::pair<transport::PeerId, uint32_t>>;

WorkerTable ready_workers(std::vector<transport::PeerId> peers) {
  WorkerTable t;
  for (transport::PeerId p : peers) {
    t.connected(p);
    t.at(p).phase = WorkerPhase::kReady;
    t.at(p).id = "node:" + std::to_string(p);
  }
  return t;
}

// Until a batch tells their size, one credit each; then each its share of
// queue_batches, at most credits_per_worker; batches queued count as out.
TEST(WorkerTableTest, CreditsShareTheQueuesRoom) {
  SessionOptions o;
  o.queue_batches = 64;
  o.credits_per_worker = 4;
  WorkerTable t = ready_workers({1, 2});
  t.connected(3);  // still in its handshake: no credit
  EXPECT_EQ(t.grant_credits(o), (Grants{{1, 1}, {2, 1}}));
  EXPECT_TRUE(t.grant_credits(o).empty());
  t.note_batch_bytes(1000);
  t.at(2).queued = 2;
  EXPECT_EQ(t.grant_credits(o), (Grants{{1, 3}, {2, 1}}));
  EXPECT_EQ(t.at(1).credits, 4u);
  t.spend_credit(1);
  t.consumed({2, 2});
  EXPECT_EQ(t.at(1).credits, 3u);
  EXPECT_EQ(t.at(2).queued, 0u);
  EXPECT_EQ(t.grant_credits(o), (Grants{{1, 1}, {2, 2}}));
}

// A room of queue_bytes at the recent batch size bounds the credits, and
// never to less than one a worker.
TEST(WorkerTableTest, TheBytesBoundTheCredits) {
  SessionOptions o;
  o.queue_batches = 64;
  o.queue_bytes = 3000;
  o.credits_per_worker = 4;
  WorkerTable t = ready_workers({1, 2});
  t.note_batch_bytes(1000);  // room for 3 batches
  EXPECT_EQ(t.grant_credits(o), (Grants{{1, 1}, {2, 1}}));
  WorkerTable many = ready_workers({1, 2, 3, 4});
  many.note_batch_bytes(1000);
  EXPECT_EQ(many.grant_credits(o), (Grants{{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
}

TEST(WorkerTableTest, PhasesSayWhoTakesSplitsAndWhoIsSlow) {
  WorkerTable t = ready_workers({1, 2});
  t.at(2).draining = true;
  t.connected(3);
  t.connected(4);
  t.at(4).phase = WorkerPhase::kRank;
  EXPECT_EQ(t.count(WorkerPhase::kReady), 2u);
  EXPECT_EQ(t.taking_splits(), std::vector<transport::PeerId>{1});
  EXPECT_EQ(t.drainable(), (std::vector<std::pair<transport::PeerId, std::string>>{{1, "node:1"}}));
  EXPECT_EQ(t.in_phases({WorkerPhase::kReady, WorkerPhase::kRank}), (std::vector<transport::PeerId>{1, 2, 4}));
  EXPECT_TRUE(t.slow_handshakes(60).empty());
  EXPECT_EQ(t.slow_handshakes(-1), std::vector<transport::PeerId>{3});
  EXPECT_NE(t.find(3), nullptr);
  t.erase(3);
  EXPECT_EQ(t.find(3), nullptr);
}

}  // namespace
}  // namespace goldminer
