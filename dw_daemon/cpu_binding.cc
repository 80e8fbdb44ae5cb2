#include "dw_daemon/cpu_binding.h"

#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace goldminer::dw {

struct CpuBinder::Impl {
  hwloc_topology_t topology = nullptr;
  std::vector<hwloc_bitmap_t> core_sets;  // the usable PUs of each usable core
  int machine_cores = 0;
  ~Impl() {
    for (hwloc_bitmap_t s : core_sets) hwloc_bitmap_free(s);
    if (topology != nullptr) hwloc_topology_destroy(topology);
  }
};

Expected<std::unique_ptr<CpuBinder>> CpuBinder::create() {
  std::unique_ptr<CpuBinder> b(new CpuBinder());
  b->impl_ = std::make_unique<Impl>();
  Impl& m = *b->impl_;
  if (hwloc_topology_init(&m.topology) != 0 || hwloc_topology_load(m.topology) != 0)
    return Status::error(std::string("hwloc: cannot read this machine's topology: ") + std::strerror(errno));
  // Without HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED the topology holds only
  // the cpuset's PUs; the process's affinity may narrow them further.
  hwloc_bitmap_t mine = hwloc_bitmap_alloc();
  if (hwloc_get_cpubind(m.topology, mine, HWLOC_CPUBIND_PROCESS) != 0)
    hwloc_bitmap_copy(mine, hwloc_topology_get_allowed_cpuset(m.topology));
  hwloc_bitmap_and(mine, mine, hwloc_topology_get_allowed_cpuset(m.topology));
  m.machine_cores = hwloc_get_nbobjs_by_type(m.topology, HWLOC_OBJ_CORE);
  for (int i = 0; i < m.machine_cores; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(m.topology, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
    hwloc_bitmap_t usable = hwloc_bitmap_alloc();
    hwloc_bitmap_and(usable, core->cpuset, mine);
    if (hwloc_bitmap_iszero(usable)) {
      hwloc_bitmap_free(usable);
      continue;
    }
    b->cores_.push_back(hwloc_bitmap_first(usable));
    m.core_sets.push_back(usable);
  }
  hwloc_bitmap_free(mine);
  if (b->cores_.empty()) return Status::error("hwloc: no core is allowed to this process");
  return b;
}

CpuBinder::~CpuBinder() = default;

std::string CpuBinder::describe() const {
  std::string s = cores_.size() == 1 ? "core " : "cores ";
  for (size_t i = 0; i < cores_.size(); ++i) s += (i ? "," : "") + std::to_string(cores_[i]);
  return s + " of " + std::to_string(impl_->machine_cores);
}

Status CpuBinder::bind_this_thread(size_t index, size_t threads) const {
  const size_t n = impl_->core_sets.size();
  size_t first = index % n, count = 1;
  if (threads > 0 && threads < n) {
    const size_t i = index % threads, each = n / threads, extra = n % threads;
    first = i * each + std::min(i, extra);
    count = each + (i < extra ? 1 : 0);
  }
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (size_t c = first; c < first + count; ++c) hwloc_bitmap_or(set, set, impl_->core_sets[c]);
  const int rc = hwloc_set_cpubind(impl_->topology, set, HWLOC_CPUBIND_THREAD);
  const int err = errno;
  hwloc_bitmap_free(set);
  if (rc != 0)
    return Status::error("hwloc: cannot bind a thread to core" + std::string(count > 1 ? "s " : " ") +
                         std::to_string(cores_[first]) + (count > 1 ? "-" + std::to_string(cores_[first + count - 1]) : "") +
                         ": " + std::strerror(err));
  return Status();
}

std::vector<int> CpuBinder::this_thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

}  // namespace goldminer::dw
