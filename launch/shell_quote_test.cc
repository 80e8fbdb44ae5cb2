#include "launch/shell_quote.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

TEST(ShellQuoteTest, ShellWordsRoundTrip) {
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

}  // namespace
}  // namespace goldminer
