// goldminer-ctld: shares data workers across the cluster's goldminer jobs
// (ctld/ctld_service.h). Runs as SlurmUser next to slurmctld; asks Slurm
// who owns a job (squeue) and how many CPUs are spare (scontrol), and
// nothing else of it. See goldminer-ctld(8).
#include <signal.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>

#include "ctld/ctld_service.h"
#include "ctld/http.h"
#include "gmcore/companion_job.h"
#include "gmcore/log.h"
#include "gmcore/subprocess.h"
#include "sched/select_config.h"
#include "sched/worker_pool.h"

namespace po = boost::program_options;
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

std::vector<std::string> own_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

// Runs a Slurm client command with this daemon's PATH and SLURM_CONF.
Expected<std::string> slurm(const std::string& name, const std::vector<std::string>& args) {
  static const std::vector<std::string> env = slurm_command_env(own_environment());
  auto spec = command_on_path(name, args, env);
  if (!spec.ok()) return spec.status();
  spec->timeout_s = 10;
  auto r = run_command(*spec);
  if (!r.ok()) return Status::error(name + ": " + r.status().message());
  if (r->exit_code != 0) return Status::error(describe(*r));
  return r->output;
}

Expected<JobOwner> job_owner(uint32_t job_id) {
  auto out = slurm("squeue", {"--noheader", "--jobs=" + std::to_string(job_id), "--format=%U %T"});
  if (!out.ok()) {
    if (out.status().message().find("Invalid job id") != std::string::npos) return Status::error("not known to Slurm");
    return Status::error("squeue: " + out.status().message());
  }
  std::istringstream in(*out);
  long uid = -1;
  JobOwner owner;
  if (!(in >> uid >> owner.state) || uid < 0) return Status::error("not known to Slurm");
  owner.uid = static_cast<uid_t>(uid);
  return owner;
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
  std::string listen, partition, munge_socket, pid_file, slurm_conf;
  double worker_cpus = -1, stale_after = 30, reserve = -1;
  bool verbose = false;
  po::options_description desc(
      "Usage: goldminer-ctld [OPTION]...\n"
      "Shares the cluster's data-worker CPUs among running goldminer jobs: each elastic session\n"
      "reports its queue, and is answered with its worker target. Serves /jobs (goldminer-top)\n"
      "and /metrics (Prometheus) on the same port.\n\nOptions");
  desc.add_options()
      ("help", "print this help and exit")
      ("listen", po::value(&listen)->default_value("0.0.0.0:6830"), "HOST:PORT to serve on")
      ("worker-cpus", po::value(&worker_cpus), "CPUs to share among data workers (default: the spare CPUs of "
       "--partition's nodes, plus those the workers hold)")
      ("partition", po::value(&partition), "partition whose nodes data workers run on (default: every node)")
      ("reserve-cpus-per-gpu", po::value(&reserve), "CPUs kept next to each free GPU (default: goldminer.conf's "
       "reserve_cpus_per_gpu)")
      ("stale-after", po::value(&stale_after)->default_value(30), "seconds after which a silent job is dropped")
      ("munge-socket", po::value(&munge_socket), "munged's socket (default: munge's own)")
      ("pid-file", po::value(&pid_file), "write the daemon's PID to this file")
      ("verbose,v", po::bool_switch(&verbose), "log every report");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    return fail(std::string(e.what()) + " (see --help)", 2);
  }
  if (vm.count("worker-cpus") && !(worker_cpus >= 0 && worker_cpus <= 1e7))
    return fail("--worker-cpus: must be 0 to 10000000", 2);
  if (!(stale_after > 0 && stale_after <= 86400)) return fail("--stale-after: must be 0 to 86400 seconds", 2);
  if (vm.count("reserve-cpus-per-gpu") && !(reserve >= 0 && reserve <= 1024))
    return fail("--reserve-cpus-per-gpu: must be 0 to 1024", 2);
  if (!vm.count("reserve-cpus-per-gpu")) {
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
  auto spare = [partition, placement]() -> Expected<double> {
    auto out = slurm("scontrol", {"--details", "--oneliner", "show", "node"});
    if (!out.ok()) return Status::error("scontrol show node: " + out.status().message());
    auto nodes = parse_node_list(*out, partition);
    if (!nodes.ok()) return Status::error("scontrol show node: " + nodes.status().message());
    return spare_worker_cpus(*nodes, placement);
  };
  const auto start = std::chrono::steady_clock::now();
  auto now = [start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  CtldSettings settings;
  settings.worker_cpus = worker_cpus;
  settings.stale_after_s = stale_after;
  CtldService service(settings, credentials.get(), job_owner, spare, now);

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
  char figures[160];
  std::snprintf(figures, sizeof figures, "worker CPUs %s, %g CPUs kept per free GPU",
                worker_cpus >= 0 ? std::to_string(static_cast<long long>(worker_cpus)).c_str()
                                 : ("from the nodes of " + (partition.empty() ? std::string("every partition")
                                                                             : "partition " + partition)).c_str(),
                reserve);
  log::info("goldminer-ctld: serving on " + listen + " (port " + std::to_string((*server)->port()) + "), " + figures);
  (*server)->serve([&service](const HttpRequest& r) { return service.handle(r); });
  log::info("goldminer-ctld: stopped");
  g_server = nullptr;
  if (!pid_file.empty()) ::unlink(pid_file.c_str());
  return 0;
}
