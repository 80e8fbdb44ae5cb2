// Reading cluster traces in the Alibaba cluster-trace-gpu-v2023 format:
// a pods CSV (one row per pod = one job) and a nodes CSV. Columns are found
// by header name, so extra columns and any column order are accepted.
// Errors name the file, the line and the column.
#ifndef GOLDMINER_SIM_TRACE_H_
#define GOLDMINER_SIM_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer::sim {

struct TracePod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int64_t gpu_milli = 0;  // per GPU; < 1000 means a shared fraction of one GPU
  std::string qos;
  std::string phase;
  int64_t creation_time = 0;
  int64_t deletion_time = 0;
  bool scheduled = false;  // false: the trace never ran it (no run time)
  int64_t scheduled_time = 0;
  int line = 0;  // in the CSV, for messages

  // milli-GPU the pod holds: num_gpu * gpu_milli (a shared GPU counts its
  // fraction).
  int64_t gpu_total_milli() const { return num_gpu * gpu_milli; }
  // Seconds it ran in the trace.
  int64_t run_time() const { return deletion_time - scheduled_time; }
};

struct TraceNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;
};

// Splits one CSV record (RFC 4180 quoting; no embedded newlines).
std::vector<std::string> split_csv_line(const std::string& line);

Expected<std::vector<TracePod>> read_pods(const std::string& path);
Expected<std::vector<TraceNode>> read_nodes(const std::string& path);

}  // namespace goldminer::sim

#endif  // GOLDMINER_SIM_TRACE_H_
