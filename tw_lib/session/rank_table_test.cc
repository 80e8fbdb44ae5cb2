// Tests of rank 0's table of the other ranks (tw_lib/session/rank_table.h),
// alone: joins, statuses, where workers go.
#include "tw_lib/session/rank_table.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

TEST(RankTableTest, JoinsAndWhoIsMissing) {
  RankTable t(4);
  EXPECT_EQ(t.missing(), "1, 2, 3");
  t.join(2, 10, "ucx://b:1");
  EXPECT_EQ(t.missing(), "1, 3");
  EXPECT_EQ(t.joined(), 2u);
  EXPECT_FALSE(t.all_joined());
  EXPECT_FALSE(t.earlier_link(2, 10));
  EXPECT_EQ(t.earlier_link(2, 11), 10u);
  EXPECT_FALSE(t.earlier_link(1, 11));
  t.join(1, 11, "ucx://a:1");
  t.join(3, 12, "ucx://c:1");
  EXPECT_TRUE(t.all_joined());
  EXPECT_EQ(t.forget(11), 1u);
  EXPECT_FALSE(t.forget(11));
  EXPECT_EQ(t.missing(), "1");
}

// A worker goes to the rank with the fewest, rank 0 first on a tie; another
// rank's count is the workers sent to it less those it lost.
TEST(RankTableTest, WorkersGoWhereFewestAre) {
  RankTable t(3);
  t.join(1, 10, "ucx://a:1");
  t.join(2, 11, "ucx://b:1");
  EXPECT_EQ(t.fewest_workers(0), 0u);
  EXPECT_EQ(t.fewest_workers(1), 1u);
  EXPECT_EQ(t.send_to(1), "ucx://a:1");
  EXPECT_EQ(t.fewest_workers(1), 2u);
  EXPECT_EQ(t.send_to(2), "ucx://b:1");
  EXPECT_EQ(t.fewest_workers(1), 0u);
  RankTable::Sums sums = t.status(10, 1, 40, 1);  // rank 1 lost its worker
  EXPECT_EQ(sums.workers, 1u);
  EXPECT_EQ(sums.arrived, 40u);
  EXPECT_EQ(sums.left_unasked, 1);
  EXPECT_EQ(t.fewest_workers(1), 1u);
  sums = t.status(11, 2, 7, 0);
  EXPECT_EQ(sums.workers, 3u);
  EXPECT_EQ(sums.arrived, 47u);
  EXPECT_EQ(sums.left_unasked, 1);
}

}  // namespace
}  // namespace goldminer
