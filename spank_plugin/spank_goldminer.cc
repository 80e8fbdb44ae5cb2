// spank_goldminer.so: `--goldminer[=key=value,...]` for sbatch, salloc and
// srun. The only file that speaks SPANK: it registers the option, hands
// values to the Slurm-free core (launch/job_settings.h) and maps its answers
// to SPANK return codes. This is the one switch on spank_context()
// (STYLE.md §1). No exception leaves an entry point (STYLE.md §2).
//
// It also starts a job's data workers as launch/worker_start.h decides:
// from a batch job's batch step, as a companion job
// (launch/companion_job.h), or, when the job is heterogeneous with a
// CPU-only component, as a step of that component (launch/het_step.h),
// also from the first node of a salloc or srun hetjob's steps. When that
// step ends, it ends what it started: the worker step, and the companion
// jobs an elastic session added.
// launch/subprocess.h runs sbatch, squeue, scancel and srun as the job's
// user, from plugstack.conf slurm_bindir (never the job's PATH), with no
// descriptor, signal state or high descriptor limit of slurmstepd's; each
// squeue, sbatch and scancel is killed after slurm_command_timeout, so a
// slow slurmctld holds a step for a bounded time (spank_goldminer(8),
// COMMANDS THE PLUGIN RUNS). The trainer's port, and each data-parallel
// rank's, come from the node's port registry (launch/port_registry.h).
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <unistd.h>

#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "launch/companion_job.h"
#include "launch/container_image.h"
#include "launch/het_step.h"
#include "launch/job_environment.h"
#include "gmcore/host_port.h"
#include "launch/job_firewall.h"
#include "launch/job_firewall_nft.h"
#include "launch/job_options.h"
#include "launch/job_settings.h"
#include "gmcore/log.h"
#include "launch/node_address.h"
#include "launch/port_registry.h"
#include "launch/slurm_cli.h"
#include "launch/slurm_command.h"
#include "launch/subprocess.h"
#include "launch/worker_start.h"

// SPANK_PLUGIN() defines these; in C++ they need C linkage declared first.
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
int slurm_spank_init(spank_t sp, int ac, char** av);
int slurm_spank_init_post_opt(spank_t sp, int ac, char** av);
int slurm_spank_user_init(spank_t sp, int ac, char** av);
int slurm_spank_task_init(spank_t sp, int ac, char** av);
int slurm_spank_exit(spank_t sp, int ac, char** av);
}
SPANK_PLUGIN(goldminer, 1)

namespace {

goldminer::JobSettings settings;
std::string option_usage;  // must outlive the registration

// What this step started and ends with it.
struct Companion {
  uint32_t job_id = 0;  // the job whose companion jobs end with this step; 0: none
  std::vector<std::string> slurm_env;  // PATH and SLURM_CONF for squeue and scancel
  std::string work_dir;
  int worker_step = -1;  // pidfd of the srun of the workers' step; -1: none
};
Companion companion;

// Where this step's trainer listens: this node's address (node_address,
// the site's dw_network) and the port (launch/port_registry.h) reserved
// in init_post_opt, while slurmstepd is still root; used by start_workers,
// released at exit.
struct TrainerPort {
  std::string address;  // "" when unknown: `error` says why
  int port = 0;         // 0: none; `error` says why when one was wanted
  int ucx_port = 0;     // firewall=nftables: UCX's TCP transport's (GOLDMINER_UCX_PORT); 0: none
  std::string error;
};
TrainerPort trainer_port;

// The ports of this step's ranks on this node: in an srun step of several
// tasks, each task but rank 0 (which listens at the job's GOLDMINER_LISTEN)
// gets one from the registry, so that ranks listen within the site's
// dw_ports too (a firewall open for that range lets workers reach them).
// Reserved in init_post_opt, handed to each task as GOLDMINER_RANK_LISTEN
// in task_init, released at exit. A rank without one (the range full)
// listens on any free port, as outside Slurm.
std::map<uint32_t, std::string> rank_listen;  // global task id -> ucx://ADDR:PORT
std::map<uint32_t, int> rank_ucx_port;          // firewall=nftables: global task id -> UCX's TCP port

// The pyxis container this step runs in (launch/container_image.h), as
// seen in the remote init: an srun step's own --container-image is in the
// job environment there only. Handed to the trainer in user_init.
goldminer::PyxisContainer step_container;

// The nftables table guarding this step's ports (plugstack.conf
// firewall=nftables, launch/job_firewall.h), deleted at exit; "": none.
std::string firewall_table;

void to_slurm_log(goldminer::log::Level level, const std::string& line) {
  using goldminer::log::Level;
  switch (level) {
    case Level::kError: slurm_error("%s", line.c_str()); break;
    case Level::kInfo: slurm_info("%s", line.c_str()); break;
    case Level::kVerbose: slurm_verbose("%s", line.c_str()); break;
    case Level::kDebug: slurm_debug("%s", line.c_str()); break;
  }
}

// Runs one entry point's body; an exception becomes a logged error and -1.
template <typename Body>
int guarded(const char* where, Body body) {
  try {
    return body();
  } catch (const std::exception& e) {
    slurm_error("goldminer: %s: internal error: %s", where, e.what());
  } catch (...) {
    slurm_error("goldminer: %s: internal error", where);
  }
  return -1;
}

int on_goldminer_option(int /*val*/, const char* optarg, int /*remote*/) {
  return guarded("--goldminer", [&] {
    goldminer::Status st = settings.set_option(optarg);
    if (!st.ok()) {
      goldminer::log::error(st.message());
      return -1;
    }
    return 0;
  });
}

int register_option(spank_t sp) {
  option_usage = goldminer::job_option_usage();
  struct spank_option option = {
      const_cast<char*>("goldminer"), const_cast<char*>("[key=value,...]"),
      const_cast<char*>(option_usage.c_str()), 2 /* optional argument */, 0,
      on_goldminer_option};
  spank_err_t rc = spank_option_register(sp, &option);
  if (rc != ESPANK_SUCCESS) {
    slurm_error("goldminer: cannot register --goldminer: %s", spank_strerror(rc));
    return -1;
  }
  return 0;
}

// Remote (slurmstepd): sets a hook's variables (launch/job_environment.h
// JobVariables) in the step's environment, each checked against the
// job-environment contract first.
uint32_t job_id(spank_t sp);

int set_job_variables(spank_t sp, const goldminer::JobVariables& vars) {
  goldminer::Status st = vars.check();
  if (!st.ok()) {
    slurm_error("goldminer: job %u: %s", job_id(sp), st.message().c_str());
    return -1;
  }
  for (const auto& [name, value] : vars.list()) {
    spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
    if (rc != ESPANK_SUCCESS) {
      slurm_error("goldminer: cannot set %s in the job environment: %s", name.c_str(), spank_strerror(rc));
      return -1;
    }
  }
  return 0;
}

bool is_batch_step(spank_t sp) {
  uint32_t step = 0;
  return spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step == SLURM_BATCH_SCRIPT;
}

bool is_extern_step(spank_t sp) {
  uint32_t step = 0;
  return spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS &&
         (step == SLURM_EXTERN_CONT || step == SLURM_INTERACTIVE_STEP);
}

uint32_t job_id(spank_t sp) {
  uint32_t id = 0;
  spank_get_item(sp, S_JOB_ID, &id);
  return id;
}

std::vector<std::string> job_environment(spank_t sp) {
  char** env = nullptr;
  std::vector<std::string> out;
  if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || env == nullptr) return out;
  for (char** e = env; *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

goldminer::Expected<goldminer::Credentials> job_user(spank_t sp) {
  goldminer::Credentials c;
  gid_t* groups = nullptr;
  int ngroups = 0;
  if (spank_get_item(sp, S_JOB_UID, &c.uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &c.gid) != ESPANK_SUCCESS)
    return goldminer::Status::error("cannot tell the job's user and group");
  if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &groups, &ngroups) == ESPANK_SUCCESS && groups != nullptr)
    c.groups.assign(groups, groups + ngroups);
  return c;
}

// Where the site's plugstack.conf sets the directory and time limit of
// the Slurm commands this plugin runs.
const char kSlurmBindirSource[] = "plugstack.conf slurm_bindir";
const char kSlurmTimeoutSource[] = "plugstack.conf slurm_command_timeout";

// Runs the Slurm command `name` (from plugstack.conf slurm_bindir, never
// the job's PATH) as the job's user, with `env` only and the job's soft
// limits; one that overruns slurm_command_timeout is killed and an error
// naming it.
goldminer::Expected<goldminer::CommandResult> run_as_job_user(spank_t sp, const std::string& name,
                                                              const std::vector<std::string>& args,
                                                              const std::vector<std::string>& env,
                                                              const std::string& cwd) {
  auto user = job_user(sp);
  if (!user.ok()) return user.status();
  auto spec = goldminer::command_in(settings.admin().slurm_bindir, kSlurmBindirSource, name, args, env);
  if (!spec.ok()) return spec.status();
  spec->cwd = cwd;
  spec->as = *user;
  spec->daemon_limits = true;
  spec->soft_limits = goldminer::job_soft_limits(job_environment(sp));
  spec->timeout_s = settings.admin().slurm_command_timeout_s;
  return goldminer::run_command_within(*spec, kSlurmTimeoutSource);
}

uint32_t node_id(spank_t sp) {
  uint32_t id = 0;
  spank_get_item(sp, S_JOB_NODEID, &id);
  return id;
}

// Slurm's commands as the job's user (run_as_job_user), with `env`, from
// `cwd`: what launch/slurm_cli.h's calls run through.
goldminer::SlurmCommand job_user_commands(spank_t sp, std::vector<std::string> env, std::string cwd) {
  return [sp, env = std::move(env), cwd = std::move(cwd)](const std::string& name,
                                                          const std::vector<std::string>& args) {
    return run_as_job_user(sp, name, args, env, cwd);
  };
}

// The job's components as squeue lists them (launch/slurm_cli.h).
goldminer::Expected<std::vector<goldminer::JobComponent>> job_components(spank_t sp, const std::vector<std::string>& env) {
  return goldminer::job_components(job_user_commands(sp, goldminer::slurm_command_env(env), "/"), job_id(sp));
}

// Starts the workers' step in the job's CPU-only component `workers`;
// the trainer's variables of the step go to `vars`.
goldminer::Status start_worker_step(spank_t sp, const goldminer::CompanionJob& plan,
                                    const goldminer::JobComponent& workers, const std::string& job,
                                    goldminer::JobVariables* vars) {
  goldminer::HetStep step = goldminer::plan_het_step(plan, settings.admin(), job_id(sp), workers);
  vars->add(step.trainer_env);
  auto user = job_user(sp);
  if (!user.ok()) return user.status();
  auto spec = goldminer::command_in(settings.admin().slurm_bindir, kSlurmBindirSource, "srun", step.srun_args,
                                    step.srun_env);
  if (!spec.ok()) return spec.status();
  spec->cwd = plan.work_dir;
  spec->as = *user;
  spec->daemon_limits = true;
  spec->soft_limits = goldminer::job_soft_limits(job_environment(sp));
  auto pidfd = goldminer::spawn_detached(*spec, step.output_path);
  if (!pidfd.ok()) return pidfd.status();
  companion.worker_step = *pidfd;
  goldminer::log::info(job + ": data workers are step " + step.name + " of component " + step.component + " (" +
                       std::to_string(workers.ntasks) + " x goldminer-dw, " + std::to_string(workers.cpus_per_task) +
                       " CPUs each), trainer address " + plan.trainer + ", output " + step.output_path);
  return goldminer::Status();
}

// user_init of a batch step, or of node 0 of another step: carries out
// the job's worker start (launch/worker_start.h: a companion job, a step
// of its CPU-only component, or nothing); the trainer's variables (where
// its session listens, the workers' job or step) go to `vars`. A failure
// does not fail the job: it is logged and reaches the trainer as
// GOLDMINER_DW_ERROR.
void start_workers(spank_t sp, bool batch_step, goldminer::JobVariables* vars) {
  const goldminer::JobOptions& options = *settings.options();
  const std::string job = "goldminer: job " + std::to_string(job_id(sp));
  const std::vector<std::string> env = job_environment(sp);
  goldminer::WorkerStartRequest request;
  request.site = batch_step ? goldminer::StartSite::kBatchStep : goldminer::StartSite::kJobStep;
  request.options = options;
  request.job_id = job_id(sp);
  request.components = [&] { return job_components(sp, env); };
  const goldminer::WorkerStartPlan start = goldminer::plan_worker_start(request);
  if (!start.why.empty()) goldminer::log::verbose(job + ": " + start.why);
  if (start.start == goldminer::WorkerStart::kNone) return;
  auto fail = [&](const std::string& why) {
    std::string message = job + ": cannot start its data workers: " + why;
    goldminer::log::error(message);
    vars->set("GOLDMINER_DW_ERROR", message);
  };
  if (trainer_port.address.empty() || trainer_port.port == 0) return fail(trainer_port.error);
  goldminer::BatchJob batch;
  batch.job_id = request.job_id;
  batch.env = env;
  batch.work_dir = start.work_dir;
  batch.time_left = start.time_left;
  batch.node_address = trainer_port.address;
  batch.trainer_port = trainer_port.port;
  batch.ucx_port = trainer_port.ucx_port;
  batch.elastic = start.elastic;
  goldminer::CompanionJob plan = goldminer::plan_companion_job(options, settings.admin(), batch);
  vars->add(plan.trainer_env);
  companion = {batch.job_id, goldminer::slurm_command_env(batch.env), plan.work_dir, -1};
  if (start.start == goldminer::WorkerStart::kHetStep) {
    goldminer::Status st = start_worker_step(sp, plan, start.component, job, vars);
    if (!st.ok()) fail(st.message());
    return;
  }
  // A sbatch that timed out may still have submitted the job: the step's
  // exit finds it by name (companion is set above) and cancels it.
  auto id = goldminer::submit(job_user_commands(sp, plan.sbatch_env, plan.work_dir), plan.sbatch_args);
  if (!id.ok()) return fail(id.status().message());
  vars->set("GOLDMINER_DW_JOB", std::to_string(*id));
  goldminer::log::info(job + ": data workers are job " + std::to_string(*id) + " (" +
                       std::to_string(start.workers) + " x goldminer-dw), trainer address " + plan.trainer);
}

// Exit of the step that started workers: the workers' step and jobs end
// with it (launch/companion_job.h end_companion_jobs).
int end_companion_jobs(spank_t sp) {
  if (companion.worker_step >= 0 && !goldminer::stop_detached(companion.worker_step, goldminer::kCompanionSelfEndS,
                                                               goldminer::kCompanionDrainGraceS))
    goldminer::log::error("goldminer: job " + std::to_string(job_id(sp)) +
                          ": its workers' step did not end within " +
                          std::to_string(static_cast<int>(goldminer::kCompanionDrainGraceS)) + " s of SIGTERM: killed");
  companion.worker_step = -1;
  if (companion.job_id == 0) return 0;
  auto user = job_user(sp);
  if (!user.ok()) {
    goldminer::log::error("goldminer: job " + std::to_string(job_id(sp)) + ": its data workers: " +
                          user.status().message());
    return 0;
  }
  goldminer::Status s = goldminer::end_companion_jobs(
      companion.job_id, user->uid, job_user_commands(sp, companion.slurm_env, companion.work_dir));
  if (!s.ok())
    goldminer::log::error("goldminer: job " + std::to_string(job_id(sp)) + ": its data workers: " + s.message());
  companion = {};
  return 0;
}

}  // namespace

extern "C" int slurm_spank_init(spank_t sp, int ac, char** av) {
  return guarded("init", [&] {
    goldminer::log::set_sink(to_slurm_log);
    goldminer::Status st = settings.configure(std::vector<std::string>(av, av + ac));
    if (!st.ok()) {
      goldminer::log::error(st.message());
      return -1;
    }
    switch (spank_context()) {
      case S_CTX_ALLOCATOR:  // sbatch, salloc
      case S_CTX_LOCAL:      // srun
      case S_CTX_REMOTE:  // slurmstepd: the option callback runs here too
        step_container = goldminer::pyxis_container_of(job_environment(sp));
        return register_option(sp);
      case S_CTX_SLURMD:  // plugstack.conf was checked above; nothing else
      case S_CTX_JOB_SCRIPT:
      case S_CTX_ERROR:
        return 0;
    }
    return 0;
  });
}

// Whether this step may start data workers (user_init): the batch step, or
// node 0 of another step.
bool may_start_workers(spank_t sp) { return is_batch_step(sp) || (node_id(sp) == 0 && !is_extern_step(sp)); }

// The node's registry of trainer ports (launch/port_registry.h): root's,
// checked on each use; its lock is waited for at most
// goldminer::kRegistryLockWaitS, in init_post_opt and at exit each.
goldminer::PortRegistry port_registry(const goldminer::AdminConfig& admin) {
  goldminer::PortRegistry registry;
  registry.path = admin.port_registry;
  registry.range = admin.dw_ports;
  return registry;
}

// The global ids of this srun step's tasks on this node that are ranks
// other than 0 (each gets a port of its own: rank_listen).
std::vector<uint32_t> other_local_ranks(spank_t sp) {
  std::vector<uint32_t> ranks;
  uint32_t total = 0, local = 0;
  if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &total) != ESPANK_SUCCESS || total < 2) return ranks;
  if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local) != ESPANK_SUCCESS) return ranks;
  for (uint32_t l = 0; l < local; ++l) {
    uint32_t rank = 0;
    if (spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, l, &rank) == ESPANK_SUCCESS && rank != 0) ranks.push_back(rank);
  }
  return ranks;
}

// The commands behind firewall=nftables, as the site configured them.
goldminer::FirewallTools firewall_tools(spank_t sp) {
  const goldminer::AdminConfig& admin = settings.admin();
  goldminer::FirewallTools tools;
  tools.nft = admin.nft;
  tools.nft_source = "plugstack.conf nft";
  tools.scontrol = admin.slurm_bindir + "/scontrol";
  tools.script_dir = admin.port_registry.substr(0, admin.port_registry.rfind('/'));
  tools.env = goldminer::slurm_command_env(job_environment(sp));
  tools.timeout_s = admin.slurm_command_timeout_s;
  tools.timeout_source = kSlurmTimeoutSource;
  return tools;
}

// Installs the table that admits new connections to `ports` only from
// the job's nodes, firewall_admit and this node (`address`).
goldminer::Status open_firewall(spank_t sp, const std::vector<int>& ports, const std::string& address) {
  const goldminer::FirewallTools tools = firewall_tools(sp);
  const std::vector<std::string> env = job_environment(sp);
  const std::vector<std::string> lists = goldminer::job_nodelists(env);
  if (lists.empty()) return goldminer::Status::error("the step's environment names no SLURM_JOB_NODELIST");
  auto nodes = goldminer::node_addresses(tools, lists);
  if (!nodes.ok()) return nodes.status();
  goldminer::JobFirewall f;
  f.job = job_id(sp);
  f.pid = getpid();
  auto start = goldminer::process_start_time(f.pid);
  if (!start.ok()) return start.status();
  f.start = *start;
  f.ports = ports;
  f.admitted = *nodes;
  f.admitted.push_back(address);
  auto site = goldminer::parse_admitted_list(settings.admin().firewall_admit);  // checked with the config
  if (!site.ok()) return site.status();
  for (const auto& net : *site) f.admitted.push_back(net.text);
  auto table = goldminer::open_job_firewall(tools, f, [](pid_t pid, uint64_t since) {
    auto now = goldminer::process_start_time(pid);
    return now.ok() && *now == since;
  });
  if (!table.ok()) return table.status();
  firewall_table = *table;
  goldminer::log::info("goldminer: job " + std::to_string(f.job) + ": nftables table " + firewall_table +
                       " admits only the job's nodes, firewall_admit and this node to its ports");
  return goldminer::Status();
}

extern "C" int slurm_spank_init_post_opt(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("init_post_opt", [&] {
    if (spank_context() != S_CTX_REMOTE || !settings.requested() || is_extern_step(sp)) return 0;
    if (!goldminer::why_no_companion_job(*settings.options()).empty()) return 0;
    const bool trainer = may_start_workers(sp);
    const goldminer::AdminConfig& admin = settings.admin();
    // Computed once: the trainer's address (start_workers) and the ranks'.
    auto address = goldminer::node_address(admin.dw_network);
    if (!address.ok()) {
      trainer_port.error = address.status().message();
      return 0;
    }
    if (trainer) trainer_port.address = *address;
    goldminer::PortRegistry registry = port_registry(admin);
    registry.bindable = [a = *address](int port) { return goldminer::bind_probe(a, port); };
    // The ranks' ports and the trainer's in one hold of the registry's lock
    // (at most goldminer::kRegistryLockWaitS).
    const std::vector<uint32_t> ranks = is_batch_step(sp) ? std::vector<uint32_t>() : other_local_ranks(sp);
    std::vector<std::string> tags;
    for (uint32_t rank : ranks) tags.push_back("rank:" + std::to_string(rank));
    if (trainer) tags.push_back("");
    // Under firewall=nftables each listener's UCX gets a port of the
    // registry too, so that the rules guard its TCP data connections.
    if (admin.firewall) {
      for (uint32_t rank : ranks) tags.push_back("ucx:rank:" + std::to_string(rank));
      if (trainer) tags.push_back("ucx");
    }
    if (tags.empty()) return 0;
    const std::string job = "goldminer: job " + std::to_string(job_id(sp));
    auto ports = goldminer::reserve_ports(registry, job_id(sp), getpid(), tags);
    if (!ports.ok()) {
      goldminer::log::error(job + ": " + ports.status().message() +
                            (ranks.empty() ? "" : " (its ranks listen on any free port)"));
      if (trainer) trainer_port.error = ports.status().message();
      return 0;
    }
    for (uint32_t rank : ranks) {
      auto it = ports->find("rank:" + std::to_string(rank));
      if (auto u = ports->find("ucx:rank:" + std::to_string(rank)); u != ports->end()) rank_ucx_port[rank] = u->second;
      if (it != ports->end())
        rank_listen[rank] = "ucx://" + goldminer::host_port_text(*address, it->second);
      else
        goldminer::log::error(job + ": rank " + std::to_string(rank) + ": " +
                              goldminer::no_port_left(registry).message() + " (it listens on any free port)");
    }
    if (trainer) {
      if (auto u = ports->find("ucx"); u != ports->end()) trainer_port.ucx_port = u->second;
      auto it = ports->find("");
      if (it != ports->end()) {
        trainer_port.port = it->second;
      } else {
        trainer_port.error = goldminer::no_port_left(registry).message();
        goldminer::log::error(job + ": " + trainer_port.error);
      }
    }
    if (!admin.firewall || ports->empty()) return 0;
    std::vector<int> guarded;
    for (const auto& [tag, port] : *ports) guarded.push_back(port);
    // The site asked for the rules: a step without them does not run.
    goldminer::Status st = open_firewall(sp, guarded, *address);
    if (st.ok()) return 0;
    goldminer::log::error(job + ": firewall=nftables: " + st.message());
    return -1;
  });
}

extern "C" int slurm_spank_user_init(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("user_init", [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    // The job's settings (on the step's first user_init on this node), then
    // the trainer's, if this step starts the job's workers.
    goldminer::JobVariables vars(settings.take_environment());
    if (settings.requested() && (is_batch_step(sp) || may_start_workers(sp)))
      start_workers(sp, is_batch_step(sp), &vars);
    // A trainer in a pyxis container: its workers enter the same image.
    if (settings.requested()) vars.add(goldminer::container_variables(step_container, job_environment(sp)));
    return set_job_variables(sp, vars);
  });
}

// In each task: its rank's port (rank_listen), for goldminer.Session.
extern "C" int slurm_spank_task_init(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("task_init", [&] {
    if (spank_context() != S_CTX_REMOTE || rank_listen.empty()) return 0;
    uint32_t rank = 0;
    if (spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS) return 0;
    auto it = rank_listen.find(rank);
    if (it == rank_listen.end()) return 0;
    goldminer::JobVariables vars;
    vars.set("GOLDMINER_RANK_LISTEN", it->second);
    if (auto u = rank_ucx_port.find(rank); u != rank_ucx_port.end())
      vars.set("GOLDMINER_RANK_UCX_PORT", std::to_string(u->second));
    // A task without its port listens on any free one: not a failure.
    set_job_variables(sp, vars);
    return 0;
  });
}

extern "C" int slurm_spank_exit(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("exit", [&] {
    if (spank_context() == S_CTX_REMOTE) end_companion_jobs(sp);
    if (!firewall_table.empty()) {
      goldminer::Status st = goldminer::close_job_firewall(firewall_tools(sp), firewall_table);
      if (!st.ok()) goldminer::log::error("goldminer: job " + std::to_string(job_id(sp)) + ": " + st.message());
      firewall_table.clear();
    }
    if (trainer_port.port != 0 || !rank_listen.empty()) {
      const goldminer::AdminConfig& admin = settings.admin();
      goldminer::Status st =
          goldminer::release_port(port_registry(admin), job_id(sp), getpid());
      if (!st.ok()) goldminer::log::error("goldminer: job " + std::to_string(job_id(sp)) + ": " + st.message());
      trainer_port = {};
      rank_listen.clear();
      rank_ucx_port.clear();
    }
    goldminer::log::set_sink(nullptr);
    return 0;
  });
}
