#include "tw_lib/session/receive_memory.h"

#include <hwloc.h>

#include <cstdlib>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "gm_config.h"
#include "gmcore/log.h"

#ifdef GOLDMINER_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace goldminer {
namespace {

// A loaded topology; with `pci`, its PCI devices too (to find a GPU's
// locality: hwloc's PCI discovery, which keeps some memory of
// libpciaccess's for the process's life, is only asked for then).
class Topology {
 public:
  static Expected<std::shared_ptr<Topology>> load(bool pci) {
    auto t = std::shared_ptr<Topology>(new Topology);
    if (hwloc_topology_init(&t->topo_) != 0) return Status::error("hwloc: cannot initialise a topology");
    t->initialised_ = true;
    if (pci) hwloc_topology_set_io_types_filter(t->topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(t->topo_) != 0) return Status::error("hwloc: cannot read this machine's topology");
    return t;
  }
  ~Topology() {
    if (initialised_) hwloc_topology_destroy(topo_);
  }
  hwloc_topology_t get() const { return topo_; }
  // "0-1", "0,2": the OS indexes of the NUMA nodes in `set`.
  static std::string nodes(hwloc_const_bitmap_t set) {
    char* text = nullptr;
    hwloc_bitmap_list_asprintf(&text, set);
    std::string s = text != nullptr ? text : "?";
    std::free(text);
    return s;
  }
  std::string all_nodes() const { return nodes(hwloc_topology_get_topology_nodeset(topo_)); }

 private:
  Topology() = default;
  hwloc_topology_t topo_{};
  bool initialised_ = false;
};

class TrainerMemory final : public transport::HostMemory {
 public:
  // `nodeset` (owned; null: not bound) needs `topo`.
  TrainerMemory(std::shared_ptr<Topology> topo, hwloc_bitmap_t nodeset, bool pin, std::string where)
      : topo_(std::move(topo)), nodeset_(nodeset), pin_(pin), where_(std::move(where)) {}
  ~TrainerMemory() override {
    if (nodeset_ != nullptr) hwloc_bitmap_free(nodeset_);
  }

  uint8_t* allocate(size_t bytes) override {
    void* p = nullptr;
    if (nodeset_ != nullptr) {
      p = hwloc_alloc_membind(topo_->get(), bytes, nodeset_, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    } else if (posix_memalign(&p, 64, bytes) != 0) {
      p = nullptr;
    }
    if (p == nullptr || !pin_) return static_cast<uint8_t*>(p);
#ifdef GOLDMINER_HAVE_CUDA
    const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
    std::lock_guard<std::mutex> lock(mu_);
    if (e != cudaSuccess) cudaGetLastError();  // clears it for the process's next CUDA call
    if (e == cudaSuccess) {
      registered_.insert(p);
    } else if (unpinned_++ == 0) {
      log::error("goldminer: session: a receive buffer of " + std::to_string(bytes) +
                 " bytes could not be pinned (cudaHostRegister: " + cudaGetErrorString(e) +
                 "); such buffers stay pageable");
    }
#endif
    return static_cast<uint8_t*>(p);
  }

  void release(uint8_t* data, size_t bytes) override {
#ifdef GOLDMINER_HAVE_CUDA
    if (pin_) {
      bool registered;
      {
        std::lock_guard<std::mutex> lock(mu_);
        registered = registered_.erase(data) != 0;
      }
      if (registered) cudaHostUnregister(data);
    }
#endif
    if (nodeset_ != nullptr)
      hwloc_free(topo_->get(), data, bytes);
    else
      std::free(data);
  }

  bool pinned() const override { return pin_; }
  std::string describe() const override { return std::string(pin_ ? "pinned" : "pageable") + where_; }

 private:
  std::shared_ptr<Topology> topo_;
  hwloc_bitmap_t nodeset_;
  bool pin_;
  std::string where_;
  std::mutex mu_;
  std::unordered_set<void*> registered_;
  uint64_t unpinned_ = 0;
};

// The PCI bus id of CUDA device `device` (-1: the current one), or "".
std::string gpu_bus_id(int device) {
#ifdef GOLDMINER_HAVE_CUDA
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) return "";
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
#else
  (void)device;
  return "";
#endif
}

}  // namespace

int cuda_devices(std::string* why) {
#ifdef GOLDMINER_HAVE_CUDA
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why != nullptr) *why = std::string("the CUDA runtime sees no GPU (") + cudaGetErrorString(e) + ")";
    return 0;
  }
  if (n == 0 && why != nullptr) *why = "the CUDA runtime sees no GPU";
  return n;
#else
  if (why != nullptr) *why = "goldminer was built without CUDA (configure --with-cuda)";
  return 0;
#endif
}

Expected<ReceiveMemory> make_receive_memory(const ReceiveMemoryOptions& o) {
  ReceiveMemory out;
  bool pin = o.pin;
  std::string why;
  const int gpus = (pin || o.numa_node == ReceiveMemoryOptions::kNumaAuto) ? cuda_devices(&why) : 0;
  if (pin && gpus == 0) {
    out.warnings.push_back("pin_memory: " + why + "; receive buffers stay pageable");
    pin = false;
  }
  if (o.numa_node < ReceiveMemoryOptions::kNumaNone)
    return Status::error("numa_node " + std::to_string(o.numa_node) + ": give a node's number, -1 (auto) or -2 (none)");
  std::shared_ptr<Topology> topo;
  hwloc_bitmap_t nodeset = nullptr;
  std::string where;
  if (o.numa_node >= 0 || (o.numa_node == ReceiveMemoryOptions::kNumaAuto && gpus > 0)) {
    auto t = Topology::load(/*pci=*/o.numa_node < 0);
    if (!t.ok()) {
      if (o.numa_node >= 0) return t.status();
      out.warnings.push_back("numa_node auto: " + t.status().message() + "; receive buffers are not bound");
    } else {
      topo = *t;
      if (o.numa_node >= 0) {
        hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topo->get(), static_cast<unsigned>(o.numa_node));
        if (node == nullptr)
          return Status::error("numa_node " + std::to_string(o.numa_node) + ": this machine has NUMA node(s) " +
                               topo->all_nodes());
        nodeset = hwloc_bitmap_dup(node->nodeset);
        where = ", NUMA node " + std::to_string(o.numa_node);
      } else {
        const std::string bus = gpu_bus_id(o.cuda_device);
        hwloc_obj_t pci = bus.empty() ? nullptr : hwloc_get_pcidev_by_busidstring(topo->get(), bus.c_str());
        hwloc_obj_t near = pci != nullptr ? hwloc_get_non_io_ancestor_obj(topo->get(), pci) : nullptr;
        if (near != nullptr && near->nodeset != nullptr && !hwloc_bitmap_iszero(near->nodeset)) {
          nodeset = hwloc_bitmap_dup(near->nodeset);
          where = ", NUMA node " + Topology::nodes(nodeset) + " (nearest GPU " + bus + ")";
        } else {
          out.warnings.push_back("numa_node auto: " +
                                 (bus.empty() ? std::string("no PCI bus id for the GPU")
                                              : "hwloc does not locate GPU " + bus) +
                                 "; receive buffers are not bound");
        }
      }
    }
  }
  if (!pin && nodeset == nullptr) {
    out.memory = transport::pageable_memory();
    return out;
  }
  out.memory = std::make_shared<TrainerMemory>(topo, nodeset, pin, where);
  return out;
}

}  // namespace goldminer
