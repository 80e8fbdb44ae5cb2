#include "sim/svg_plot.h"

#include <algorithm>
#include <cstdio>

namespace goldminer::sim {
namespace {

constexpr double kWidth = 900, kHeight = 420, kLeft = 60, kRight = 160, kTop = 40, kBottom = 50;
const char* const kColors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string fmt(const char* format, double a, double b = 0) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, a, b);
  return buf;
}

}  // namespace

std::string render_allocation_svg(const std::vector<Series>& series, const std::string& title) {
  double t_max = 1;
  for (const auto& s : series)
    if (!s.second.empty()) t_max = std::max(t_max, s.second.back().t);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x = [&](double t) { return kLeft + plot_w * t / t_max; };
  auto y = [&](double v) { return kTop + plot_h * (1 - v); };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", kWidth) +
                    "\" height=\"" + fmt("%.0f", kHeight) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt("%.0f", kLeft) + "\" y=\"24\" font-size=\"15\">" + escape(title) + "</text>\n";
  for (int i = 0; i <= 4; ++i) {  // y grid: 0, 25, 50, 75, 100 %
    double v = i / 4.0;
    svg += "<line x1=\"" + fmt("%.1f", kLeft) + "\" x2=\"" + fmt("%.1f", kLeft + plot_w) + "\" y1=\"" +
           fmt("%.1f", y(v)) + "\" y2=\"" + fmt("%.1f", y(v)) + "\" stroke=\"#ddd\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", kLeft - 8) + "\" y=\"" + fmt("%.1f", y(v) + 4) +
           "\" text-anchor=\"end\">" + fmt("%.0f%%", v * 100) + "</text>\n";
  }
  for (int i = 0; i <= 5; ++i) {  // x ticks in hours
    double t = t_max * i / 5;
    svg += "<text x=\"" + fmt("%.1f", x(t)) + "\" y=\"" + fmt("%.1f", kTop + plot_h + 18) +
           "\" text-anchor=\"middle\">" + fmt("%.1f h", t / 3600) + "</text>\n";
  }
  svg += "<text x=\"" + fmt("%.1f", kLeft + plot_w / 2) + "\" y=\"" + fmt("%.1f", kHeight - 8) +
         "\" text-anchor=\"middle\">time since first arrival</text>\n";
  svg += "<text transform=\"translate(16," + fmt("%.1f", kTop + plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">GPUs allocated</text>\n";

  for (size_t s = 0; s < series.size(); ++s) {
    const auto& points = series[s].second;
    const char* color = kColors[s % (sizeof(kColors) / sizeof(kColors[0]))];
    // At most ~2 points per pixel column keeps the file small.
    size_t stride = std::max<size_t>(1, points.size() / static_cast<size_t>(2 * plot_w));
    std::string path;
    double last_v = 0;
    for (size_t i = 0; i < points.size(); i += stride) {
      const auto& p = points[i];
      path += path.empty() ? "M" : " L";
      path += fmt("%.1f,%.1f", x(p.t), y(last_v));
      path += " L" + fmt("%.1f,%.1f", x(p.t), y(p.gpu_allocated));
      last_v = p.gpu_allocated;
    }
    svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.2\"/>\n";
    double ly = kTop + 20 + 20 * static_cast<double>(s);
    svg += "<line x1=\"" + fmt("%.1f", kWidth - kRight + 15) + "\" x2=\"" + fmt("%.1f", kWidth - kRight + 40) +
           "\" y1=\"" + fmt("%.1f", ly) + "\" y2=\"" + fmt("%.1f", ly) + "\" stroke=\"" + color +
           "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", kWidth - kRight + 46) + "\" y=\"" + fmt("%.1f", ly + 4) + "\">" +
           escape(series[s].first) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace goldminer::sim
