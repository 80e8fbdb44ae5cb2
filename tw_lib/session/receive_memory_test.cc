// Tests of the trainer's receive memory (receive_memory.h): a named NUMA
// node binds the buffers, a missing one is an error naming the machine's
// nodes, pin_memory without a GPU warns and stays pageable, with a GPU the
// buffers are registered with CUDA, and a session receives its batches
// into that memory. The GPU tests skip, saying so, where CUDA sees no GPU;
// they run on the device machine (bench/device/cuda_checks.sh).
#include "tw_lib/session/receive_memory.h"

#include <gtest/gtest.h>
#include <hwloc.h>

#include <cstring>
#include <set>
#include <string>

#include "gm_config.h"
#include "goldminer/session.h"
#include "tw_lib/session/dataplane_test_util.h"

#ifdef GOLDMINER_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace goldminer {
namespace {

using testing::TempDir;
using testing::text_session;

// The NUMA node(s) holding [data, data + size), as hwloc reports them
// ("" if it cannot tell).
std::string nodes_of(const void* data, size_t size) {
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  hwloc_topology_load(t);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  std::string out;
  if (hwloc_get_area_memlocation(t, data, size, set, HWLOC_MEMBIND_BYNODESET) == 0 && !hwloc_bitmap_iszero(set)) {
    char* text = nullptr;
    hwloc_bitmap_list_asprintf(&text, set);
    out = text;
    free(text);
  }
  hwloc_bitmap_free(set);
  hwloc_topology_destroy(t);
  return out;
}

// Whether hwloc can bind allocations and tell where pages are here.
bool can_bind(std::string* why) {
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  hwloc_topology_load(t);
  const hwloc_topology_support* s = hwloc_topology_get_support(t);
  const bool ok = s->membind->alloc_membind && s->membind->bind_membind && s->membind->get_area_memlocation;
  hwloc_topology_destroy(t);
  if (!ok) *why = "hwloc cannot bind memory or locate pages on this machine";
  return ok;
}

bool registered_with_cuda(const void* p) {
#ifdef GOLDMINER_HAVE_CUDA
  cudaPointerAttributes a{};
  return cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeHost;
#else
  (void)p;
  return false;
#endif
}

TEST(ReceiveMemoryTest, ANamedNodeBindsTheBuffers) {
  std::string why;
  if (!can_bind(&why)) GTEST_SKIP() << why;
  ReceiveMemoryOptions o;
  o.numa_node = 0;
  auto m = make_receive_memory(o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->memory->describe(), "pageable, NUMA node 0");
  EXPECT_FALSE(m->memory->pinned());
  const size_t size = size_t{4} << 20;
  uint8_t* p = m->memory->allocate(size);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 1, size);  // the pages exist once touched
  EXPECT_EQ(nodes_of(p, size), "0");
  m->memory->release(p, size);
}

TEST(ReceiveMemoryTest, AMissingNodeIsAnErrorNamingTheMachinesNodes) {
  ReceiveMemoryOptions o;
  o.numa_node = 4095;
  auto m = make_receive_memory(o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("numa_node 4095: this machine has NUMA node(s) 0"), std::string::npos)
      << m.status().message();
  o.numa_node = -3;
  m = make_receive_memory(o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("numa_node -3"), std::string::npos) << m.status().message();
}

TEST(ReceiveMemoryTest, NothingAskedIsPlainPageableMemory) {
  ReceiveMemoryOptions o;
  o.numa_node = ReceiveMemoryOptions::kNumaNone;
  auto m = make_receive_memory(o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->memory, transport::pageable_memory());
  EXPECT_TRUE(m->warnings.empty());
}

TEST(ReceiveMemoryTest, PinWithoutAGpuWarnsAndStaysPageable) {
  std::string why;
  if (cuda_devices(&why) > 0) GTEST_SKIP() << "CUDA sees a GPU here (PinnedBuffersAreRegisteredWithCuda runs)";
  ReceiveMemoryOptions o;
  o.pin = true;
  auto m = make_receive_memory(o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FALSE(m->memory->pinned());
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_EQ(m->warnings[0], "pin_memory: " + why + "; receive buffers stay pageable");
#ifdef GOLDMINER_HAVE_CUDA
  EXPECT_NE(why.find("the CUDA runtime sees no GPU"), std::string::npos) << why;
#else
  EXPECT_NE(why.find("built without CUDA"), std::string::npos) << why;
#endif
}

TEST(ReceiveMemoryTest, PinnedBuffersAreRegisteredWithCuda) {
  std::string why;
  if (cuda_devices(&why) == 0) GTEST_SKIP() << "needs a GPU: " << why;
  ReceiveMemoryOptions o;
  o.pin = true;  // and the node nearest the GPU (auto)
  auto m = make_receive_memory(o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  for (const std::string& w : m->warnings) std::printf("warning: %s\n", w.c_str());
  EXPECT_TRUE(m->memory->pinned());
  EXPECT_EQ(m->memory->describe().rfind("pinned", 0), 0u) << m->memory->describe();
  std::printf("receive memory: %s\n", m->memory->describe().c_str());
  const size_t size = size_t{8} << 20;
  uint8_t* p = m->memory->allocate(size);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(registered_with_cuda(p));
  EXPECT_TRUE(registered_with_cuda(p + size - 1));
#ifdef GOLDMINER_HAVE_CUDA
  // A copy to the GPU and back through the pinned buffer.
  std::memset(p, 7, size);
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, size), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dev, p, size, cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(dev, 9, 16, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(p, dev, size, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(p[0], 9);
  EXPECT_EQ(p[size - 1], 7);
  cudaStreamDestroy(stream);
  cudaFree(dev);
#endif
  m->memory->release(p, size);
  EXPECT_FALSE(registered_with_cuda(p)) << "unregistered when given back";
}

// A session receives every batch into its receive memory: registered with
// CUDA under pin_memory where there is a GPU, on NUMA node 0 when named.
TEST(ReceiveMemoryTest, ASessionReceivesItsBatchesThere) {
  std::string why;
  const bool gpu = cuda_devices(&why) > 0;
  const bool bind = can_bind(&why);
  if (!gpu && !bind) GTEST_SKIP() << why;
  TempDir d;
  SessionOptions o = text_session(d, 1000, "local://receive-memory-test");
  o.local_workers = 1;
  o.pin_memory = gpu;
  o.numa_node = bind ? 0 : ReceiveMemoryOptions::kNumaAuto;
  auto s = Session::create(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->receive_memory(), std::string(gpu ? "pinned" : "pageable") + (bind ? ", NUMA node 0" : ""));
  std::set<int64_t> records;
  for (const SessionBatch& b : (*s)->epoch()) {
    const wire::TensorView& data = b.tensors[0];
    if (gpu) {
      EXPECT_TRUE(registered_with_cuda(data.data));
    }
    if (bind) {
      EXPECT_EQ(nodes_of(data.data, data.nbytes), "0");
    }
    for (uint32_t i = 0; i < b.samples; ++i) records.insert(b.sample_ids[2 * i + 1]);
  }
  EXPECT_TRUE((*s)->status().ok()) << (*s)->status().message();
  EXPECT_EQ(records.size(), 1000u);
}

}  // namespace
}  // namespace goldminer
