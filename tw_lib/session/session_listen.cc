#include "tw_lib/session/session_listen.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "gmcore/host_port.h"
#include "gmcore/log.h"
#include "launch/port_registry.h"
#include "launch/trainer_rendezvous.h"

namespace goldminer {
namespace {

// "uid 1001" or "uids 1001, 1002": who listens on `port` now, or "".
std::string listeners_of(int port) {
  std::string who;
  size_t n = 0;
  for (const auto& [uid, count] : listeners_by_uid(PortRange{port, port}, "/proc/net")) {
    who += (who.empty() ? "" : ", ") + std::to_string(uid);
    ++n;
  }
  return who.empty() ? "" : (n == 1 ? "uid " : "uids ") + who;
}

uint32_t job_id(const char* text) {
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const unsigned long v = std::strtoul(text, &end, 10);
  return *end == '\0' && *text != '-' && v > 0 && v <= 4294967295UL ? static_cast<uint32_t>(v) : 0;
}

}  // namespace

Expected<std::unique_ptr<transport::Endpoint>> listen_or_fall_back(const SessionOptions& o,
                                                                   const transport::Options& to) {
  auto ep = transport::listen(o.listen, to);
  if (ep.ok() || ep.status().message().find(transport::kAddressInUse) == std::string::npos) return ep;
  // Rank 0 (or the only rank) publishes: the job's Comment names one
  // address, the one GOLDMINER_LISTEN named.
  const bool publishes = o.publish_listen && o.rank == 0;
  const bool shares_rank0 = o.world_size > 1 && o.rank > 0 && !o.rank0.empty();
  if (!publishes && !shares_rank0) return ep;
  if (o.listen.rfind("ucx://", 0) != 0) return ep;
  auto at = parse_host_port(o.listen.substr(6), "listen address");
  if (!at.ok() || at->port == "0") return ep;
  const std::string holder = listeners_of(std::atoi(at->port.c_str()));
  const std::string taken = "port " + at->port + " of " + at->host + " is taken (listened on by " +
                            (holder.empty() ? std::string("a process this node's /proc/net does not show") : holder) +
                            ")";
  auto other = transport::listen("ucx://" + host_port_text(at->host, 0), to);
  if (!other.ok())
    return Status::error("session: " + taken + ", and no other port: " + other.status().message());
  const std::string address = (*other)->address();
  if (publishes) {
    Status s = o.publish_listen(address);
    if (!s.ok())
      return Status::error("session: " + taken + "; listening at " + address +
                           " instead, which the job's workers cannot learn: " + s.message());
    log::error("goldminer: session: " + taken + ": listening at " + address +
               " instead, published in the job's Comment for its workers and ranks");
  } else {
    log::error("goldminer: session: " + taken + ": listening at " + address + " instead (rank 0 learns it)");
  }
  return other;
}

void rendezvous_from_environment(SessionOptions* o, const JobEnvironment& env) {
  const uint32_t job = job_id(std::getenv("SLURM_JOB_ID"));
  if (job == 0 || job != env.auth_job || env.listen.empty()) return;
  // squeue and scontrol: 10 s each at most, so a session fails within
  // about 25 s when slurmctld does not answer.
  SlurmCommand slurm = user_slurm_command(10);
  o->publish_listen = [slurm, job](const std::string& address) { return publish_trainer(slurm, job, address); };
  o->published_rank0 = [slurm, job] { return published_trainer(slurm, job); };
}

int ucx_data_port(const SessionOptions& o) {
  if (!o.rank_listen.empty() && o.listen == o.rank_listen) return o.rank_listen_ucx_port;
  if (!o.rank0.empty() && o.listen == o.rank0) return o.listen_ucx_port;
  return 0;
}

}  // namespace goldminer
