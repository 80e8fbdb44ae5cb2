// Torch-free parts of the split API: modes, file reading, the human and
// JSON reports, and the offload advisor (split.h).
#include <cerrno>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "gmcore/json.h"
#include "goldminer/split.h"

namespace goldminer {
namespace {

std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string values_json(const std::vector<CutValue>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    const CutValue& c = values[i];
    s += (i ? ", " : "") + std::string("{\"name\": ") + json_string(c.name) + ", \"dtype\": " + json_string(c.dtype) +
         ", \"shape\": " + shape_text(c.shape) + ", \"bytes_per_sample\": " + num(c.bytes_per_sample) + "}";
  }
  return s + "]";
}

void append(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void append(std::string* out, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  *out += buf;
}

}  // namespace

Expected<SplitMode> parse_split_mode(const std::string& text) {
  if (text == "dataset") return SplitMode::kDataset;
  if (text == "extended") return SplitMode::kExtended;
  if (text == "max") return SplitMode::kMax;
  return Status::error("goldminer-split: mode: invalid value '" + text + "': expected extended, dataset or max");
}

const char* split_mode_name(SplitMode mode) {
  switch (mode) {
    case SplitMode::kDataset: return "dataset";
    case SplitMode::kExtended: return "extended";
    case SplitMode::kMax: return "max";
  }
  return "?";
}

Expected<std::string> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream data;
  data << in.rdbuf();
  if (in.bad()) return Status::error("cannot read " + path + ": " + std::strerror(errno));
  return data.str();
}

std::string format_report(const SplitReport& r) {
  std::string s;
  append(&s, "split of %s (mode %s), example batch %lld\n", r.method.c_str(), r.mode.c_str(),
         static_cast<long long>(r.batch_size));
  append(&s, "  nodes: %d total, %d stateless, %d moved to the worker\n", r.nodes_total, r.nodes_stateless,
         r.nodes_moved);
  append(&s, "  cut (%zu values):\n", r.cut.size());
  for (const CutValue& c : r.cut)
    append(&s, "    %-24s %-10s %-20s %10.1f bytes/sample\n", c.name.c_str(), c.dtype.c_str(),
           shape_text(c.shape).c_str(), c.bytes_per_sample);
  append(&s, "  bytes per sample crossing: %.1f in dataset mode, %.1f with this split\n", r.bytes_per_sample_before,
         r.bytes_per_sample_after);
  append(&s, "  priced for a %s trainer at batch %lld: link %.3g GB/s (%s)", r.trainer_device.c_str(),
         static_cast<long long>(r.priced_batch_size), r.link_gbps, r.link_source.c_str());
  if (r.host_to_device_gbps > 0) append(&s, ", host-to-device %.3g GB/s", r.host_to_device_gbps);
  s += "\n  trainer-side nodes: " + r.node_costs + "\n";
  append(&s, "  candidate cuts (ms per batch of %lld):\n", static_cast<long long>(r.priced_batch_size));
  append(&s, "    %-28s %6s %12s %9s %9s %9s %9s  %s\n", "cut", "nodes", "bytes/sample", "trainer", "network",
         "h2d", "total", "outcome");
  for (const CandidateCut& c : r.candidates)
    append(&s, "    %-28s %6d %12.1f %9.3f %9.3f %9.3f %9.3f  %s\n", c.name.c_str(), c.nodes_moved,
           c.bytes_per_sample, c.trainer_ms, c.network_ms, c.host_to_device_ms, c.total_ms(), c.outcome.c_str());
  s += "  chosen because: " + r.chosen_because + "\n";
  append(&s, "  predicted trainer time saved vs dataset mode: %.3f ms/batch of %lld\n", r.predicted_ms_saved_per_batch,
         static_cast<long long>(r.priced_batch_size));
  if (r.measured) {
    append(&s, "  measured CPU ms/batch: local %.3f (transform %.3f), dataset-mode trainer %.3f, this trainer %.3f, "
               "worker %.3f, transfer %.3f\n",
           r.trainer_ms_local, r.transform_ms, r.trainer_ms_dataset, r.trainer_ms, r.worker_ms, r.transfer_ms);
    append(&s, "  measured trainer time saved: %.3f ms/batch (vs dataset mode %.3f ms/batch)\n",
           r.trainer_ms_saved_per_batch, r.trainer_ms_dataset - r.trainer_ms);
  }
  append(&s, "  analysis %.2f ms, split %.2f ms\n", r.analysis_ms, r.split_ms);
  append(&s, "  kept on the trainer at the boundary:\n");
  if (r.kept.empty()) s += "    (none)\n";
  for (const KeptNode& k : r.kept) {
    append(&s, "    %s", k.node.c_str());
    if (k.count > 1) append(&s, " (x%d)", k.count);
    s += " <- " + k.reason + "\n";
  }
  return s;
}

std::string report_json(const SplitReport& r) {
  std::string s = "{";
  s += "\"mode\": " + json_string(r.mode) + ", \"method\": " + json_string(r.method);
  s += ", \"nodes_total\": " + std::to_string(r.nodes_total);
  s += ", \"nodes_stateless\": " + std::to_string(r.nodes_stateless);
  s += ", \"nodes_moved\": " + std::to_string(r.nodes_moved);
  s += ", \"batch_size\": " + std::to_string(r.batch_size);
  s += ", \"inputs\": " + values_json(r.inputs);
  s += ", \"cut\": " + values_json(r.cut);
  s += ", \"bytes_per_sample_before\": " + num(r.bytes_per_sample_before);
  s += ", \"bytes_per_sample_after\": " + num(r.bytes_per_sample_after);
  s += ", \"predicted_ms_saved_per_batch\": " + num(r.predicted_ms_saved_per_batch);
  s += std::string(", \"measured\": ") + (r.measured ? "true" : "false");
  s += ", \"trainer_ms_saved_per_batch\": " + num(r.trainer_ms_saved_per_batch);
  s += ", \"trainer_ms_local\": " + num(r.trainer_ms_local);
  s += ", \"trainer_ms_dataset\": " + num(r.trainer_ms_dataset);
  s += ", \"trainer_ms\": " + num(r.trainer_ms);
  s += ", \"worker_ms\": " + num(r.worker_ms);
  s += ", \"transform_ms\": " + num(r.transform_ms);
  s += ", \"transfer_ms\": " + num(r.transfer_ms);
  s += ", \"analysis_ms\": " + num(r.analysis_ms);
  s += ", \"split_ms\": " + num(r.split_ms);
  s += ", \"trainer_device\": " + json_string(r.trainer_device);
  s += ", \"node_costs\": " + json_string(r.node_costs);
  s += ", \"priced_batch_size\": " + std::to_string(r.priced_batch_size);
  s += ", \"link_gbps\": " + num(r.link_gbps) + ", \"link_source\": " + json_string(r.link_source);
  s += ", \"host_to_device_gbps\": " + num(r.host_to_device_gbps);
  s += ", \"candidates\": [";
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const CandidateCut& c = r.candidates[i];
    s += (i ? ", " : "") + std::string("{\"name\": ") + json_string(c.name) +
         ", \"nodes_moved\": " + std::to_string(c.nodes_moved) + ", \"bytes_per_sample\": " + num(c.bytes_per_sample) +
         ", \"trainer_ms\": " + num(c.trainer_ms) + ", \"network_ms\": " + num(c.network_ms) +
         ", \"host_to_device_ms\": " + num(c.host_to_device_ms) + ", \"total_ms\": " + num(c.total_ms()) +
         ", \"measured_trainer_ms\": " + (c.measured_trainer_ms < 0 ? "null" : num(c.measured_trainer_ms)) +
         ", \"measured_dataset_ms\": " + (c.measured_dataset_ms < 0 ? "null" : num(c.measured_dataset_ms)) +
         ", \"outcome\": " + json_string(c.outcome) + "}";
  }
  s += "], \"chosen_because\": " + json_string(r.chosen_because);
  s += std::string(", \"fell_back\": ") + (r.fell_back ? "true" : "false");
  s += ", \"kept\": [";
  for (size_t i = 0; i < r.kept.size(); ++i)
    s += (i ? ", " : "") + std::string("{\"node\": ") + json_string(r.kept[i].node) +
         ", \"reason\": " + json_string(r.kept[i].reason) + ", \"count\": " + std::to_string(r.kept[i].count) + "}";
  s += "]}";
  return s;
}

Expected<Advice> advise(const SplitReport& r, int max_workers) {
  if (!r.measured) return Status::error("goldminer-split: --advise needs measurements (drop --no-measure)");
  if (max_workers < 1) return Status::error("goldminer-split: max-workers: invalid value: expected >= 1");
  Advice a;
  const double local = r.trainer_ms_local;
  const double bound = r.trainer_ms + r.transfer_ms;  // the trainer's own work per batch
  a.points.push_back({0, local, 1.0});
  a.max_speedup = 1;
  for (int k = 1; k <= max_workers; ++k) {
    double step = std::max(bound, r.worker_ms / k);
    a.points.push_back({k, step, local / step});
    if (local / step > a.max_speedup + 1e-9) a.max_speedup = local / step;
  }
  a.workers_to_saturate = static_cast<int>(std::ceil(r.worker_ms / std::max(bound, 1e-9)));
  const double gain = local - bound;
  if (gain <= 0.05 * local) {
    a.helps = false;
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "offloading will not help: the trainer's own work (%.3f ms incl. %.3f ms transfer) is within 5%% "
                  "of doing everything locally (%.3f ms)",
                  bound, r.transfer_ms, local);
    a.verdict = buf;
  } else {
    a.helps = true;
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "offloading helps: up to %.2fx with %d data worker(s); more workers do not help (the trainer's "
                  "own work, %.3f ms/batch, is the bound)",
                  local / bound, a.workers_to_saturate, bound);
    a.verdict = buf;
  }
  return a;
}

std::string format_advice(const Advice& a) {
  std::string s = "offload advice (each data worker runs the worker program on one CPU):\n";
  s += "  workers  trainer ms/batch  speedup\n";
  for (const AdvicePoint& p : a.points) append(&s, "  %7d  %16.3f  %6.2fx\n", p.workers, p.step_ms, p.speedup);
  s += "  " + a.verdict + "\n";
  return s;
}

}  // namespace goldminer
