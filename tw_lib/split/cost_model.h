// What a cut costs the trainer the job really runs (torch-free,
// unit-tested alone): the trainer's device, the job's batch size and the
// link that carries the cut.
//
// Every stateless node left on the trainer costs its time there; every
// value crossing the cut costs its bytes over the trainer's share of the
// network and, on a GPU trainer, over PCIe into device memory. Both are
// priced at the job's batch size B from figures measured at two example
// batch sizes, as fixed + per-sample parts (a linear fit), so the small
// example batch's per-operator overheads are not taken as they are.
//
// A CPU trainer's node time is the node's CPU time. A GPU trainer's node
// time is, unless measured on a GPU, the documented device model: its
// kernels' launch cost plus the bytes it reads and writes over device
// memory bandwidth (kDeviceModel; docs/SPLIT-COST.md gives each figure's
// source). The stateful rest of the model is the same for every cut and is
// not priced.
#ifndef GOLDMINER_TW_LIB_SPLIT_COST_MODEL_H_
#define GOLDMINER_TW_LIB_SPLIT_COST_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gmcore/status.h"
#include "goldminer/split.h"

namespace goldminer::split {

using goldminer::TrainerDevice;

// The GPU trainer's device model. One table: docs/SPLIT-COST.md has the
// source of every figure.
struct DeviceModel {
  double launch_us;           // per kernel: CUDA launch plus libtorch's dispatch
  double memory_gbps;         // device memory bandwidth a memory-bound kernel reaches, GB/s
  double pcie_pageable_gbps;  // host-to-device copy from pageable memory, GB/s
  double pcie_pinned_gbps;    // host-to-device copy from pinned memory, GB/s
};
constexpr DeviceModel kDeviceModel{10.0, 1500.0, 10.0, 22.0};

// A figure measured at two batch sizes, as fixed + per_sample * batch.
struct LinearCost {
  double fixed = 0;
  double per_sample = 0;
  double at(double batch) const { return fixed + per_sample * batch; }
};
// The fit through (b1, y1) and (b2, y2), neither part negative: a fall
// with the batch (timing noise) leaves only a fixed part, the smaller
// figure; b1 == b2 (one batch size only) scales y1 with the batch.
LinearCost fit_linear(double b1, double y1, double b2, double y2);

// Kernels a node of kind `kind` ("aten::add") launches on a GPU: 0 for
// views, shape queries and interpreter (prim::) nodes, 1 otherwise.
int kernels_of(const std::string& kind);

// One stateless node as the pricing sees it.
struct NodeFigures {
  LinearCost cpu_ms;    // its CPU time (measured)
  LinearCost bytes;     // tensor bytes it reads and writes
  int kernels = 0;      // launches on a GPU (kernels_of, nested blocks summed)
  LinearCost gpu_ms;    // its GPU time when measured there
  bool gpu_measured = false;
};

// How the trainer receives a batch.
struct Pricing {
  TrainerDevice device = TrainerDevice::kCuda;
  double batch = 1;          // the job's batch size
  double link_gbps = 1;      // the trainer's share of the network, GB/s
  bool pinned = false;       // batches land in pinned memory (H2D at the pinned figure)
  DeviceModel gpu = kDeviceModel;
};

// The trainer's ms per batch for the node.
double node_ms(const NodeFigures& node, const Pricing& pricing);
// Network and host-to-device ms per batch for `bytes_per_batch` crossing.
struct TransferMs {
  double network = 0;
  double host_to_device = 0;  // 0 for a CPU trainer
  double total() const { return network + host_to_device; }
};
TransferMs transfer_ms(double bytes_per_batch, const Pricing& pricing);

// The trainer's share of its node's network, and where the figure comes from.
struct Link {
  double gbps = 0;     // GB/s (bytes), what the cut is priced at
  std::string source;  // e.g. "eth0 25000 Mb/s (sysfs) / 4 GPUs per node"
};
// The link of interface `interface` ("" = the fastest up, non-loopback
// interface that reports a speed) under `sysfs_net` (/sys/class/net),
// divided by `gpus_per_node` (>= 1). With no speed readable: 10 Gb/s
// Ethernet, the common floor, assumed and said.
Link detect_link(const std::string& sysfs_net, const std::string& interface, int gpus_per_node);
// GPUs on this node: entries of /proc/driver/nvidia/gpus, else
// SLURM_GPUS_ON_NODE, else 1 (none visible: the trainer has the link).
int gpus_on_this_node();
// The interface holding the address of `listen` ("host:port" or
// "ucx://host:port": SplitOptions::listen); "" if empty, not an address
// or not local.
std::string listen_interface(const std::string& listen);

}  // namespace goldminer::split

#endif  // GOLDMINER_TW_LIB_SPLIT_COST_MODEL_H_
