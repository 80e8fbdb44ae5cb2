#include "tw_lib/split/cost_model.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "gmcore/host_port.h"

namespace goldminer::split {

LinearCost fit_linear(double b1, double y1, double b2, double y2) {
  if (b1 == b2 || b1 <= 0 || b2 <= 0) return {0, b1 > 0 ? y1 / b1 : 0};
  LinearCost c;
  c.per_sample = (y1 - y2) / (b1 - b2);
  if (c.per_sample <= 0) return {std::min(y1, y2), 0};
  c.fixed = y1 - c.per_sample * b1;
  if (c.fixed < 0) {
    // Steeper than proportional (noise): through the origin, by the larger batch.
    const double b = std::max(b1, b2), y = b == b1 ? y1 : y2;
    return {0, y / b};
  }
  return c;
}

int kernels_of(const std::string& kind) {
  if (kind.rfind("aten::", 0) != 0) return 0;  // prim::, and anything not an operator
  static const char* const kNoKernel[] = {
      "aten::size",   "aten::dim",     "aten::len",       "aten::view",    "aten::reshape", "aten::unsqueeze",
      "aten::squeeze", "aten::slice",  "aten::select",    "aten::permute", "aten::transpose", "aten::t",
      "aten::expand", "aten::expand_as", "aten::flatten", "aten::unflatten", "aten::narrow", "aten::chunk",
      "aten::split",  "aten::unbind",  "aten::alias",     "aten::detach",  "aten::numel",  "aten::__getitem__",
      "aten::Int",    "aten::Float",   "aten::ScalarImplicit", "aten::eq.int", "aten::__is__", "aten::__isnot__"};
  for (const char* k : kNoKernel)
    if (kind == k) return 0;
  return 1;
}

double node_ms(const NodeFigures& node, const Pricing& p) {
  if (p.device == TrainerDevice::kCpu) return node.cpu_ms.at(p.batch);
  if (node.gpu_measured) return node.gpu_ms.at(p.batch);
  return node.kernels * p.gpu.launch_us / 1e3 + node.bytes.at(p.batch) / (p.gpu.memory_gbps * 1e6);
}

TransferMs transfer_ms(double bytes_per_batch, const Pricing& p) {
  TransferMs t;
  t.network = bytes_per_batch / (p.link_gbps * 1e6);
  if (p.device == TrainerDevice::kCuda)
    t.host_to_device = bytes_per_batch / ((p.pinned ? p.gpu.pcie_pinned_gbps : p.gpu.pcie_pageable_gbps) * 1e6);
  return t;
}

namespace {

// Mb/s of `dir`/speed if the interface is up and says (virtual ones do not).
long interface_mbps(const std::string& dir) {
  std::ifstream state(dir + "/operstate");
  std::string up;
  state >> up;
  if (up != "up") return -1;
  std::ifstream speed(dir + "/speed");
  long mbps = -1;
  if (!(speed >> mbps)) return -1;
  return mbps;
}

}  // namespace

Link detect_link(const std::string& sysfs_net, const std::string& interface, int gpus_per_node) {
  gpus_per_node = std::max(gpus_per_node, 1);
  std::string best;
  long best_mbps = -1;
  if (!interface.empty()) {
    best = interface;
    best_mbps = interface_mbps(sysfs_net + "/" + interface);
  } else if (DIR* d = opendir(sysfs_net.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == ".." || name == "lo") continue;
      const long mbps = interface_mbps(sysfs_net + "/" + name);
      if (mbps > best_mbps || (mbps == best_mbps && name < best)) {
        best = name;
        best_mbps = mbps;
      }
    }
    closedir(d);
  }
  const std::string share = gpus_per_node > 1 ? " / " + std::to_string(gpus_per_node) + " GPUs per node" : "";
  Link link;
  if (best_mbps > 0) {
    link.gbps = best_mbps / 8e3 / gpus_per_node;
    link.source = best + " " + std::to_string(best_mbps) + " Mb/s (" + sysfs_net + ")" + share;
  } else {
    link.gbps = 10e3 / 8e3 / gpus_per_node;
    const std::string why = interface.empty() ? "no up interface under " + sysfs_net + " reports its speed"
                                              : interface + " reports no speed under " + sysfs_net;
    link.source = "10 Gb/s Ethernet assumed (" + why + ")" + share;
  }
  return link;
}

int gpus_on_this_node() {
  int n = 0;
  if (DIR* d = opendir("/proc/driver/nvidia/gpus")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  if (n > 0) return n;
  if (const char* s = std::getenv("SLURM_GPUS_ON_NODE"); s != nullptr && std::atoi(s) > 0) return std::atoi(s);
  return 1;
}

std::string listen_interface(const std::string& listen) {
  if (listen.empty()) return "";
  std::string text = listen;
  if (text.rfind("ucx://", 0) == 0) text = text.substr(6);
  auto hp = parse_host_port(text, "GOLDMINER_LISTEN");
  if (!hp.ok()) return "";
  const std::string& host = hp->host;
  in_addr v4{};
  in6_addr v6{};
  const bool is4 = inet_pton(AF_INET, host.c_str(), &v4) == 1;
  const bool is6 = !is4 && inet_pton(AF_INET6, host.c_str(), &v6) == 1;
  if (!is4 && !is6) return "";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* a = list; a != nullptr && name.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    if (is4 && a->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == v4.s_addr)
      name = a->ifa_name;
    if (is6 && a->ifa_addr->sa_family == AF_INET6 &&
        std::memcmp(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, &v6, sizeof v6) == 0)
      name = a->ifa_name;
  }
  freeifaddrs(list);
  return name;
}

}  // namespace goldminer::split

namespace goldminer {

Expected<TrainerDevice> parse_trainer_device(const std::string& text) {
  if (text == "cuda") return TrainerDevice::kCuda;
  if (text == "cpu") return TrainerDevice::kCpu;
  return Status::error("trainer-device: invalid value '" + text + "': expected cuda or cpu");
}

const char* trainer_device_name(TrainerDevice device) { return device == TrainerDevice::kCuda ? "cuda" : "cpu"; }

}  // namespace goldminer
