// Helpers for the simulator's tests.
#ifndef GOLDMINER_SIM_TEST_UTIL_H_
#define GOLDMINER_SIM_TEST_UTIL_H_

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmcore/status.h"
#include "sim/sampling.h"
#include "sim/trace.h"

namespace goldminer::sim::testing {

// One GPU job of 1 GPU asking for 1 + 7.2 CPUs: the trainer's 1 and
// P = 7.2 of pre-processing, so one worker adds g = 0.9 / 7.2 = 0.125 and
// the linear model saturates it with 8. `work` seconds of work at full
// speed.
inline std::vector<TracePod> one_job(int64_t work = 100) {
  TracePod p;
  p.name = "job";
  p.cpu_milli = 8200;
  p.num_gpu = 1;
  p.gpu_milli = 1000;
  p.scheduled = true;
  p.deletion_time = work;
  return {p};
}

// One node for it: 32 CPUs, 1 GPU.
inline const std::vector<TraceNode> kOneGpuNode = {{"g1", 32000, 1, 1, "x"}};

// A file holding `text`, removed when it goes out of scope.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/goldminer-sim-test.XXXXXX";
    int fd = mkstemp(name);
    if (fd >= 0) close(fd);
    path_ = name;
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ../shared/data as `make check` passes it (GOLDMINER_SHARED_DATA), or ""
// when absent: tests that need it skip with the reason.
inline std::string shared_data_dir() {
  const char* dir = std::getenv("GOLDMINER_SHARED_DATA");
  if (dir == nullptr) return "";
  std::ifstream probe(std::string(dir) + "/README.md");
  return probe ? dir : "";
}

// The sample of `gpus` GPUs (`seed`) of the real Alibaba slice under `dir`
// (shared_data_dir()), or why its files could not be read.
inline Expected<ClusterSample> real_trace_sample(const std::string& dir, int gpus, uint64_t seed) {
  auto pods = read_pods(dir + "/traces/alibaba-gpu-v2023/dev_slice.csv");
  if (!pods.ok()) return pods.status();
  auto nodes = read_nodes(dir + "/traces/alibaba-gpu-v2023/nodes.csv");
  if (!nodes.ok()) return nodes.status();
  return sample_cluster(*pods, *nodes, gpus, seed);
}

inline const char* kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";
inline const char* kNodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n";

}  // namespace goldminer::sim::testing

#endif  // GOLDMINER_SIM_TEST_UTIL_H_
