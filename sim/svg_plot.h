// GPU allocation over time, one line per policy, as a standalone SVG.
#ifndef GOLDMINER_SIM_SVG_PLOT_H_
#define GOLDMINER_SIM_SVG_PLOT_H_

#include <string>
#include <utility>
#include <vector>

#include "sim/simulator.h"

namespace goldminer::sim {

using Series = std::pair<std::string, std::vector<TimelinePoint>>;

// Step lines of gpu_allocated (0..1) against hours since the first arrival.
std::string render_allocation_svg(const std::vector<Series>& series, const std::string& title);

}  // namespace goldminer::sim

#endif  // GOLDMINER_SIM_SVG_PLOT_H_
