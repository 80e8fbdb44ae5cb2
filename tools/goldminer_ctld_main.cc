// goldminer-ctld: shares data workers across the cluster's goldminer jobs
// (ctld/ctld_service.h). Runs as SlurmUser next to slurmctld; asks Slurm
// who owns a job (squeue), how many CPUs are spare (scontrol show node),
// SlurmUser and PrivateData (scontrol show config, once), and nothing else
// of it. See goldminer-ctld(8).
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <string>

#include "ctld/ctld_service.h"
#include "ctld/http_server.h"
#include "gmcore/log.h"
#include "ctld/slurm_pool.h"
#include "launch/slurm_cli.h"
#include "sched/select_config.h"
#include "tools/goldminer_ctld_options.h"

using namespace goldminer;

namespace {

HttpServer* g_server = nullptr;

void on_signal(int) {
  if (g_server != nullptr) g_server->stop();
}

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "goldminer-ctld: error: %s\n", message.c_str());
  return code;
}

// Slurm's SlurmUser and PrivateData; on failure private jobs, and the
// daemon's own uid as SlurmUser.
SlurmConfig slurm_access(const SlurmCommand& slurm) {
  auto access = slurm_config(slurm);
  if (access.ok()) return *access;
  log::error("goldminer-ctld: cannot read Slurm's PrivateData and SlurmUser (taking other users' jobs as private): " +
             access.status().message());
  return SlurmConfig{::geteuid(), true};
}

// A user name or uid of --operators.
Expected<uid_t> user_id(const std::string& user) {
  if (!user.empty() && user.size() <= 10 && user.find_first_not_of("0123456789") == std::string::npos)
    return static_cast<uid_t>(std::stoul(user));
  passwd pw{}, *found = nullptr;
  char buf[4096];
  if (getpwnam_r(user.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr)
    return Status::error("--operators: invalid value '" + user.substr(0, 80) + "': no such user");
  return pw.pw_uid;
}

std::string timestamp() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CtldArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(ctld_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  const std::string &listen = a.listen, &partition = a.partition, &munge_socket = a.munge_socket,
                    &pid_file = a.pid_file, &operators = a.operators;
  double &worker_cpus = a.worker_cpus, &reserve = a.reserve;
  const double stale_after = a.stale_after, lookups_per_s = a.lookups_per_s, lookup_burst = a.lookup_burst;
  const HttpServeLimits& limits = a.limits;
  const bool verbose = a.verbose;
  if (command_line.given("worker-cpus") && !(worker_cpus >= 0 && worker_cpus <= 1e7))
    return fail("--worker-cpus: must be 0 to 10000000", 2);
  if (!(stale_after > 0 && stale_after <= 86400)) return fail("--stale-after: must be 0 to 86400 seconds", 2);
  if (!(a.max_user_share > 0 && a.max_user_share <= 1))
    return fail("--max-user-share: must be above 0 and at most 1 (a fraction of the worker CPUs)", 2);
  if (!(limits.max_connections >= 1 && limits.max_connections <= 4096))
    return fail("--max-connections: must be 1 to 4096", 2);
  if (!(limits.max_per_peer >= 1 && limits.max_per_peer <= limits.max_connections))
    return fail("--max-connections-per-peer: must be 1 to --max-connections", 2);
  if (!(limits.timeout_s >= 0.1 && limits.timeout_s <= 60)) return fail("--request-timeout: must be 0.1 to 60 seconds", 2);
  if (!(lookups_per_s >= 0 && lookups_per_s <= 1000)) return fail("--lookups-per-uid: must be 0 to 1000", 2);
  if (!(lookup_burst >= 1 && lookup_burst <= 10000)) return fail("--lookup-burst: must be 1 to 10000", 2);
  std::set<uid_t> privileged;
  for (size_t start = 0; start < operators.size();) {
    size_t comma = operators.find(',', start);
    std::string user = operators.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? operators.size() : comma + 1;
    if (user.empty()) continue;
    auto uid = user_id(user);
    if (!uid.ok()) return fail(uid.status().message(), 2);
    privileged.insert(*uid);
  }
  if (command_line.given("reserve-cpus-per-gpu") && !(reserve >= 0 && reserve <= 1024))
    return fail("--reserve-cpus-per-gpu: must be 0 to 1024", 2);
  if (!command_line.given("reserve-cpus-per-gpu")) {
    const char* conf = std::getenv("SLURM_CONF");
    const std::string path = select_config_path(conf != nullptr && *conf != '\0' ? conf : "/etc/slurm/slurm.conf");
    auto select = load_select_config(path);
    if (!select.ok()) return fail(select.status().message(), 1);
    reserve = select->reserve_cpus_per_gpu;
  }

  std::mutex log_mu;
  log::set_sink([verbose, &log_mu](log::Level level, const std::string& line) {
    if (level == log::Level::kDebug || (level == log::Level::kVerbose && !verbose)) return;
    std::lock_guard<std::mutex> lock(log_mu);
    std::fprintf(stderr, "%s %s\n", timestamp().c_str(), line.c_str());
    std::fflush(stderr);
  });

  auto server = HttpServer::listen(listen);
  if (!server.ok()) return fail("--listen " + listen + ": " + server.status().message(), 1);
  std::unique_ptr<CredentialService> credentials = munge_credentials(munge_socket);
  PlacementConfig placement;
  placement.cpus_per_gpu = reserve;
  // Slurm's client commands with this daemon's PATH and SLURM_CONF.
  const SlurmCommand slurm = user_slurm_command(10);
  auto spare = [slurm, partition, placement] { return read_slurm_cpus(slurm, partition, placement); };
  auto owner = [slurm](uint32_t job_id) { return job_owner(slurm, job_id); };
  const auto start = std::chrono::steady_clock::now();
  auto now = [start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const SlurmConfig access = slurm_access(slurm);
  privileged.insert(access.slurm_user);
  privileged.insert(::geteuid());
  CtldSettings settings;
  settings.worker_cpus = worker_cpus;
  settings.stale_after_s = stale_after;
  settings.max_user_share = a.max_user_share;
  settings.privileged_uids = privileged;
  settings.private_jobs = access.private_jobs;
  settings.owner_lookups.per_uid_per_s = lookups_per_s;
  settings.owner_lookups.burst = lookup_burst;
  CtldService service(settings, credentials.get(), owner, spare, now);

  if (!pid_file.empty()) {
    std::ofstream f(pid_file);
    f << ::getpid() << "\n";
    if (!f) return fail("--pid-file " + pid_file + ": cannot write it", 1);
  }
  g_server = server->get();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  char figures[320];
  std::snprintf(figures, sizeof figures,
                "worker CPUs %s, %g CPUs kept per free GPU; other users' jobs %s (PrivateData), %zu uids see all; "
                "%d connections, %d per peer, %g s per request",
                worker_cpus >= 0 ? std::to_string(static_cast<long long>(worker_cpus)).c_str()
                                 : ("from the nodes of " + (partition.empty() ? std::string("every partition")
                                                                             : "partition " + partition)).c_str(),
                reserve, access.private_jobs ? "hidden" : "shown without uid, user or hosts", privileged.size(),
                limits.max_connections, limits.max_per_peer, limits.timeout_s);
  log::info("goldminer-ctld: serving on " + listen + " (port " + std::to_string((*server)->port()) + "), " + figures);
  (*server)->serve([&service](const HttpRequest& r) { return service.handle(r); }, limits);
  log::info("goldminer-ctld: stopped");
  g_server = nullptr;
  if (!pid_file.empty()) ::unlink(pid_file.c_str());
  return 0;
}
