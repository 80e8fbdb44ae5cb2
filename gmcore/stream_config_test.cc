#include "gmcore/stream_config.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

TEST(StreamConfigTest, RoundTripsWithAndWithoutOrder) {
  for (bool ordered : {false, true}) {
    StreamConfig c;
    c.batch_size = 64;
    c.shuffle_buffer = 300;
    c.ordered = ordered;
    c.dataset = "format=text\nfile=/x\n";
    auto d = StreamConfig::decode(c.encode());
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_EQ(d->batch_size, 64u);
    EXPECT_EQ(d->shuffle_buffer, 300u);
    EXPECT_EQ(d->ordered, ordered);
    EXPECT_EQ(d->dataset, c.dataset);
  }
}

TEST(StreamConfigTest, ErrorsNameTheLineAndTheEntry) {
  EXPECT_EQ(StreamConfig::decode("batch_size=8\nshuffle_buffer=0\nordered=2\n\n").status().message(),
            "stream config: line 3: ordered: 0 or 1, not 2");
  EXPECT_EQ(StreamConfig::decode("batch_size=8\ncolour=red\n\n").status().message(),
            "stream config: line 2: unknown entry 'colour=red'");
  EXPECT_EQ(StreamConfig::decode("batch_size=x\n\n").status().message(),
            "stream config: line 1: batch_size: not a number: 'x'");
  EXPECT_EQ(StreamConfig::decode("batch_size=8\nshuffle_buffer=0\n").status().message(),
            "stream config: line 3: no blank line before the dataset");
  EXPECT_EQ(StreamConfig::decode("shuffle_buffer=0\n\n").status().message(), "stream config: batch_size missing or 0");
}

}  // namespace
}  // namespace goldminer
