// Helpers for the simulator's tests.
#ifndef GOLDMINER_SIM_TEST_UTIL_H_
#define GOLDMINER_SIM_TEST_UTIL_H_

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace goldminer::sim::testing {

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

inline const char* kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";
inline const char* kNodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n";

}  // namespace goldminer::sim::testing

#endif  // GOLDMINER_SIM_TEST_UTIL_H_
