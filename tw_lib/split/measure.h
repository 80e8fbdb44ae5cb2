// Measurement of a split (split.h, SplitOptions::measure): CPU time of the
// worker, the trainer, dataset mode's trainer and the transform on the
// example. Internal; includes torch headers.
#ifndef GOLDMINER_TW_LIB_SPLIT_MEASURE_H_
#define GOLDMINER_TW_LIB_SPLIT_MEASURE_H_

#include <torch/script.h>

#include <string>
#include <vector>

#include "goldminer/split.h"

namespace goldminer::split {

// Times the programs (saved bytes, reloaded so the caller's copies and RNG
// stream are untouched) on the example into `r`: median CPU ms of forward
// + backward over `repeat` runs after three warm-ups. With `cut_only` (a
// later candidate of the same split) the figures that do not depend on the
// cut, the transform's and the whole program's locally, are kept as they
// are. Throws torch's exceptions.
void measure(const std::string& worker_bytes, const std::string& trainer_bytes, const std::string& method,
             const std::vector<c10::IValue>& example, int repeat, bool cut_only, SplitReport* r);

}  // namespace goldminer::split

#endif  // GOLDMINER_TW_LIB_SPLIT_MEASURE_H_
