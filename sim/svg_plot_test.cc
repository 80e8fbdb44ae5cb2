#include "sim/svg_plot.h"

#include <gtest/gtest.h>

namespace goldminer::sim {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgPlotTest, OneLineAndLegendPerPolicy) {
  std::vector<Series> series = {
      {"bundled", {{0, 0.0}, {3600, 0.5}, {7200, 0.25}}},
      {"goldminer", {{0, 0.0}, {3600, 0.75}}},
      {"goldminer-joblevel", {}},
  };
  std::string svg = render_allocation_svg(series, "GPU allocation <64 GPUs>");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>\n"), std::string::npos);
  EXPECT_EQ(count(svg, "<path "), 3u);
  EXPECT_NE(svg.find(">goldminer-joblevel</text>"), std::string::npos);
  EXPECT_NE(svg.find("GPU allocation &lt;64 GPUs&gt;"), std::string::npos) << "title escaped";
  EXPECT_NE(svg.find(">2.0 h</text>"), std::string::npos) << "x axis spans the longest series";
  // 50% of a 330-pixel-high plot starting at y=40 is y=205.
  EXPECT_NE(svg.find(",205.0"), std::string::npos);
}

}  // namespace
}  // namespace goldminer::sim
