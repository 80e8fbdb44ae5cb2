// The cores a data worker may run on and the binding of its threads to
// them (hwloc): under Slurm a step's cores are its cgroup's cpuset (and
// its CPU affinity); one producer thread per core keeps a thread's decode
// buffers in that core's caches and keeps the threads of two workers of a
// node off each other's cores. Used by goldminer-dw (--bind).
#ifndef GOLDMINER_DW_DAEMON_CPU_BINDING_H_
#define GOLDMINER_DW_DAEMON_CPU_BINDING_H_

#include <memory>
#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer::dw {

class CpuBinder {
 public:
  // The machine's topology, restricted to the cores this process may use
  // (allowed by its cpuset and in its CPU affinity).
  static Expected<std::unique_ptr<CpuBinder>> create();
  ~CpuBinder();
  CpuBinder(const CpuBinder&) = delete;
  CpuBinder& operator=(const CpuBinder&) = delete;

  size_t cores() const { return cores_.size(); }
  // "cores 0,1 of 2" (each core by its first PU's OS index; of: the
  // machine's cores).
  std::string describe() const;
  // Binds the calling thread, thread `index` of `threads`, to its share of
  // the cores: with fewer threads than cores, a block of cores/threads
  // (the first ones one more when they do not divide), where its program
  // calls' intra-op threads, which inherit the binding, run too; else
  // core `index` mod cores(). Thread-safe.
  Status bind_this_thread(size_t index, size_t threads) const;
  // The PUs (OS indexes) the calling thread may run on now.
  static std::vector<int> this_thread_cpus();

 private:
  CpuBinder() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<int> cores_;  // first PU's OS index of each usable core
};

}  // namespace goldminer::dw

#endif  // GOLDMINER_DW_DAEMON_CPU_BINDING_H_
