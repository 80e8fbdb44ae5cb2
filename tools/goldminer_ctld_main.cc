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

// The uids of --operators (names or uids, comma-separated), once what the
// rows cannot check holds: the options that relate to each other.
Expected<std::set<uid_t>> operator_uids(const CtldArgs& a) {
  if (a.limits.max_per_peer > a.limits.max_connections)
    return Status::error("--max-connections-per-peer: invalid value '" + std::to_string(a.limits.max_per_peer) +
                         "': expected at most --max-connections (" + std::to_string(a.limits.max_connections) + ")");
  std::set<uid_t> uids;
  const std::string& operators = a.operators;
  for (size_t start = 0; start < operators.size();) {
    size_t comma = operators.find(',', start);
    std::string user = operators.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? operators.size() : comma + 1;
    if (user.empty()) continue;
    auto uid = user_id(user);
    if (!uid.ok()) return uid.status();
    uids.insert(*uid);
  }
  return uids;
}

// CPUs kept next to each free GPU: --reserve-cpus-per-gpu, else
// goldminer.conf's reserve_cpus_per_gpu beside SLURM_CONF.
Expected<double> reserve_cpus_per_gpu(const CtldArgs& a, const CommandLine& command_line) {
  if (command_line.given("reserve-cpus-per-gpu")) return a.reserve;
  const char* conf = std::getenv("SLURM_CONF");
  const std::string path = select_config_path(conf != nullptr && *conf != '\0' ? conf : "/etc/slurm/slurm.conf");
  auto select = load_select_config(path);
  if (!select.ok()) return select.status();
  return select->reserve_cpus_per_gpu;
}

// Log lines to stderr, timestamped; verbose ones only with --verbose.
void log_to_stderr(bool verbose) {
  static std::mutex log_mu;
  log::set_sink([verbose](log::Level level, const std::string& line) {
    if (level == log::Level::kDebug || (level == log::Level::kVerbose && !verbose)) return;
    std::lock_guard<std::mutex> lock(log_mu);
    std::fprintf(stderr, "%s %s\n", timestamp().c_str(), line.c_str());
    std::fflush(stderr);
  });
}

// The service's settings: the options, the uids that see every job, and
// what Slurm's config says of other users' jobs.
CtldSettings settings_of(const CtldArgs& a, const std::set<uid_t>& privileged, const SlurmConfig& access,
                         ScrapeAccess scrape) {
  CtldSettings settings;
  settings.scrape = std::move(scrape);
  settings.worker_cpus = a.worker_cpus;
  settings.stale_after_s = a.stale_after;
  settings.max_user_share = a.max_user_share;
  settings.privileged_uids = privileged;
  settings.private_jobs = access.private_jobs;
  settings.owner_lookups.per_uid_per_s = a.lookups_per_s;
  settings.owner_lookups.burst = a.lookup_burst;
  return settings;
}

// The figures the daemon starts with, for its first log line.
std::string serving_figures(const CtldArgs& a, double reserve, const SlurmConfig& access, size_t privileged) {
  char figures[320];
  std::snprintf(figures, sizeof figures,
                "worker CPUs %s, %g CPUs kept per free GPU; other users' jobs %s (PrivateData), %zu uids see all; "
                "%d connections, %d per peer, %g s per request",
                a.worker_cpus >= 0 ? std::to_string(static_cast<long long>(a.worker_cpus)).c_str()
                                   : ("from the nodes of " + (a.partition.empty() ? std::string("every partition")
                                                                                 : "partition " + a.partition)).c_str(),
                reserve, access.private_jobs ? "hidden" : "shown without uid, user or hosts", privileged,
                a.limits.max_connections, a.limits.max_per_peer, a.limits.timeout_s);
  return figures;
}

// Serves until SIGTERM or SIGINT; the PID file (if any) is there meanwhile.
int serve(HttpServer& server, CtldService& service, const CtldArgs& a, const std::string& figures) {
  if (!a.pid_file.empty()) {
    std::ofstream f(a.pid_file);
    f << ::getpid() << "\n";
    if (!f) return fail("--pid-file " + a.pid_file + ": cannot write it", 1);
  }
  g_server = &server;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  log::info("goldminer-ctld: serving on " + a.listen + " (port " + std::to_string(server.port()) + "), " + figures);
  server.serve([&service](const HttpRequest& r) { return service.handle(r); }, a.limits);
  log::info("goldminer-ctld: stopped");
  g_server = nullptr;
  if (!a.pid_file.empty()) ::unlink(a.pid_file.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CtldArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(ctld_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  auto privileged = operator_uids(a);
  if (!privileged.ok()) return fail(privileged.status().message(), 2);
  auto scrape = ScrapeAccess::make(a.metrics_token_file, a.metrics_allow);
  if (!scrape.ok()) return fail(scrape.status().message(), 2);
  auto reserve = reserve_cpus_per_gpu(a, command_line);
  if (!reserve.ok()) return fail(reserve.status().message(), 1);
  log_to_stderr(a.verbose);

  auto server = HttpServer::listen(a.listen);
  if (!server.ok()) return fail("--listen " + a.listen + ": " + server.status().message(), 1);
  std::unique_ptr<CredentialService> credentials = munge_credentials(a.munge_socket);
  PlacementConfig placement;
  placement.cpus_per_gpu = *reserve;
  // Slurm's client commands with this daemon's PATH and SLURM_CONF.
  const SlurmCommand slurm = user_slurm_command(10);
  auto spare = [slurm, partition = a.partition, placement] { return read_slurm_cpus(slurm, partition, placement); };
  auto owner = [slurm](uint32_t job_id) { return job_owner(slurm, job_id); };
  const auto start = std::chrono::steady_clock::now();
  auto now = [start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const SlurmConfig access = slurm_access(slurm);
  privileged->insert(access.slurm_user);
  privileged->insert(::geteuid());
  CtldService service(settings_of(a, *privileged, access, std::move(*scrape)), credentials.get(), owner, spare, now);
  return serve(**server, service, a, serving_figures(a, *reserve, access, privileged->size()));
}
