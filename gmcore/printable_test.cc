#include "gmcore/printable.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

TEST(PrintableTest, TerminalControlBytesAreShownNotSent) {
  // A title change, a screen clear, an 8-bit CSI, DEL and a UTF-8 C1 CSI.
  const std::string attack = std::string("c1\x1b]0;owned\x07\x1b[2J") + "\x9b" + "31m\x7f\xc2\x9b";
  const std::string out = printable(attack);
  EXPECT_EQ(out, "c1\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\x7f\\xc2\\x9b");
  for (char c : out) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
}

TEST(PrintableTest, PlainTextStaysAndNewlinesOnlyWhenAsked) {
  EXPECT_EQ(printable("JOB  USER  c[1-4] 10.0.0.1"), "JOB  USER  c[1-4] 10.0.0.1");
  EXPECT_EQ(printable("a\nb"), "a\\x0ab");
  EXPECT_EQ(printable("a\nb\r", true), "a\nb\\x0d");
  // A backslash is escaped too, so "\x1b" sent as text cannot pass for an escape.
  EXPECT_EQ(printable("\\x1b"), "\\x5cx1b");
  EXPECT_EQ(printable(std::string("\0", 1)), "\\x00");
}

TEST(PrintableTest, HostNamesAreNamesAndAddressesOnly) {
  for (const char* ok : {"c7", "gpu-node_01.cluster.example", "10.1.2.3", "[::1]", "fe80::1"})
    EXPECT_TRUE(is_host_name(ok)) << ok;
  for (const std::string bad : {std::string(), std::string("c1\x1b[2J"), std::string("a b"), std::string("a,b"),
                                std::string("h\n"), std::string(256, 'a'), std::string("caf\xc3\xa9")})
    EXPECT_FALSE(is_host_name(bad)) << printable(bad);
  EXPECT_TRUE(is_host_name(std::string(255, 'a')));
}

}  // namespace
}  // namespace goldminer
