// Tests of the session's queue between its loop thread and the consumer
// (tw_lib/session/consumer_queue.h), alone: batches in, the epoch's end,
// the consumer's position, deterministic order's held batches, the fill.
#include "tw_lib/session/consumer_queue.h"

#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <vector>

namespace goldminer {
namespace {

QueuedBatch batch(transport::PeerId from, uint64_t split, uint32_t sequence, bool last, uint64_t bytes = 100) {
  QueuedBatch b;
  b.from = from;
  b.bytes = bytes;
  b.last_of_split = last;
  b.batch.split_id = split;
  b.batch.sequence = sequence;
  b.batch.samples = 1;
  return b;
}

TEST(ConsumerQueueTest, BatchesThenTheEpochsEndThenTheNextEpoch) {
  SessionOptions o;
  ConsumerQueue q(o, 0, {});
  ASSERT_TRUE(q.push(batch(7, 0, 0, false)).ok());
  ASSERT_TRUE(q.push(batch(8, 0, 1, true)).ok());
  q.push_end_of_epoch();
  EXPECT_EQ(q.queued(), 3u);
  EXPECT_EQ(q.bytes(), 200u);
  EXPECT_EQ(q.max_queued(), 2u);
  double fill = -1;
  std::optional<QueuedBatch> first = q.take(1, &fill);
  ASSERT_TRUE(first && !first->end_of_epoch);
  EXPECT_EQ(first->from, 7u);
  // As the consumer found it: two batches (200 bytes) in a room of
  // credits_per_worker (4) for one worker.
  EXPECT_DOUBLE_EQ(fill, 2.0 / 4);
  EXPECT_EQ(q.bytes(), 100u);
  q.count_consumed(*first);
  LeasePosition p;
  q.position(&p);
  EXPECT_EQ(p.partial, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 1}}));
  std::optional<QueuedBatch> second = q.take(1, &fill);
  ASSERT_TRUE(second);
  q.count_consumed(*second);
  p = LeasePosition();
  q.position(&p);
  EXPECT_EQ(p.done, std::vector<uint64_t>{0});
  EXPECT_TRUE(p.partial.empty());
  EXPECT_EQ(q.take_consumed_from(), (std::vector<transport::PeerId>{7, 8}));
  EXPECT_TRUE(q.take_consumed_from().empty());
  std::optional<QueuedBatch> end = q.take(1, &fill);
  ASSERT_TRUE(end && end->end_of_epoch);
  EXPECT_FALSE(q.take(1, &fill));
  // The consumer saw the end: its position is the next epoch's start.
  EXPECT_EQ(q.position_epoch(), 1u);
  EXPECT_EQ(q.consumer_epoch(), 0u);
  EXPECT_FALSE(q.take_epoch_request());
  ASSERT_TRUE(q.begin_wanted_epoch());
  EXPECT_FALSE(q.begin_wanted_epoch());
  EXPECT_EQ(q.consumer_epoch(), 1u);
  EXPECT_TRUE(q.take_epoch_request());
  EXPECT_FALSE(q.take_epoch_request());
  p = LeasePosition();
  q.position(&p);
  EXPECT_EQ(p.epoch, 1u);
  EXPECT_TRUE(p.done.empty());
}

TEST(ConsumerQueueTest, DeterministicOrderHoldsBatchesUntilTheirTurn) {
  SessionOptions o;
  o.deterministic = true;
  o.queue_batches = 4;
  ConsumerQueue q(o, 0, {5, 3});
  EXPECT_EQ(q.awaited_split(), 5u);
  ASSERT_TRUE(q.push(batch(1, 3, 0, true)).ok());
  EXPECT_EQ(q.queued(), 0u);
  EXPECT_EQ(q.held(), 1u);
  EXPECT_EQ(q.bytes(), 100u);  // held batches count in the bytes
  double fill = 0;
  EXPECT_FALSE(q.take(1, &fill));
  EXPECT_DOUBLE_EQ(q.fill(1), 1.0 / 4);  // held batches count in the fill
  ASSERT_TRUE(q.push(batch(2, 5, 0, true)).ok());
  EXPECT_EQ(q.queued(), 2u);
  EXPECT_EQ(q.held(), 0u);
  EXPECT_EQ(q.max_queued(), 2u);
  EXPECT_FALSE(q.awaited_split());
  std::optional<QueuedBatch> b = q.take(1, &fill);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->batch.split_id, 5u);
  // A split the epoch's order does not hold: an error naming it.
  Status s = q.push(batch(1, 9, 0, true));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("split 9"), std::string::npos) << s.message();
}

TEST(ConsumerQueueTest, AResumedPositionIsTheConsumersFromTheStart) {
  SessionOptions o;
  o.deterministic = true;
  LeasePosition resume;
  resume.epoch = 2;
  resume.done = {3};
  resume.partial = {{5, 2}};
  resume.bad_records = 4;
  o.resume = resume;
  ConsumerQueue q(o, 2, {3, 5, 6});
  EXPECT_EQ(q.consumed_bad_records(), 4u);
  EXPECT_EQ(q.awaited_split(), 5u);  // split 3 was wholly taken
  // Split 5's next batch is its third.
  ASSERT_TRUE(q.push(batch(1, 5, 2, true)).ok());
  EXPECT_EQ(q.queued(), 1u);
  LeasePosition p;
  q.position(&p);
  EXPECT_EQ(p.epoch, 2u);
  EXPECT_EQ(p.done, std::vector<uint64_t>{3});
  EXPECT_EQ(p.partial, (std::vector<std::pair<uint64_t, uint64_t>>{{5, 2}}));
  EXPECT_EQ(p.bad_records, 4u);
}

TEST(ConsumerQueueTest, FillIsTheFullerOfBatchesAndBytes) {
  SessionOptions o;
  o.queue_batches = 8;
  o.queue_bytes = 1000;
  o.credits_per_worker = 2;
  ConsumerQueue q(o, 0, {});
  ASSERT_TRUE(q.push(batch(1, 0, 0, false, 600)).ok());
  EXPECT_DOUBLE_EQ(q.fill(1), 0.6);  // 1 of 2 batches, 600 of 1000 bytes
  EXPECT_DOUBLE_EQ(q.fill(0), 0.6);  // no worker: one worker's room
  ASSERT_TRUE(q.push(batch(1, 0, 1, false, 10)).ok());
  EXPECT_DOUBLE_EQ(q.fill(1), 1.0);   // 2 of 2 batches
  EXPECT_DOUBLE_EQ(q.fill(3), 0.61);  // 2 of 6 batches, 610 of 1000 bytes
  o.queue_bytes = 1 << 20;
  ConsumerQueue roomy(o, 0, {});
  ASSERT_TRUE(roomy.push(batch(1, 0, 0, false)).ok());
  ASSERT_TRUE(roomy.push(batch(1, 0, 1, false)).ok());
  EXPECT_DOUBLE_EQ(roomy.fill(3), 2.0 / 6);
  EXPECT_DOUBLE_EQ(roomy.fill(100), 2.0 / 8);  // queue_batches bounds the room
}

}  // namespace
}  // namespace goldminer
