// The job-environment contract: every GOLDMINER_* variable the SPANK
// plugin (and goldminer-run, goldminer-consume) set for a job's processes,
// as one table (name, value, range, help, who reads it), and the typed
// struct a process reads them into, once, each value checked against its
// row. The same table writes the man pages' ENVIRONMENT VARIABLES sections
// (man/gen_man.cc) and `--print-config` (what a process read, and from
// where, as `ucx_info -c` prints UCX's).
//
// The job options' variables (GOLDMINER_DW, GOLDMINER_CPUS_PER_DW, ...) and
// the site's (GOLDMINER_CTLD, ...) take their row's check from the table
// that parses the option (launch/job_options.h, launch/admin_config.h): one
// range per setting, wherever it is read.
#ifndef GOLDMINER_LAUNCH_JOB_ENVIRONMENT_H_
#define GOLDMINER_LAUNCH_JOB_ENVIRONMENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

// Who reads a variable (a row's `readers`, a bit set).
enum JobEnvironmentReader : unsigned {
  kReadByJobScript = 1u << 0,  // only the job's own script (documented, never read here)
  kReadBySession = 1u << 1,    // a trainer's session: goldminer.Session, goldminer-consume
  kReadByWorker = 1u << 2,     // goldminer-dw and its Python children
  kReadByTop = 1u << 3,        // goldminer-top
};

// What a process read from the GOLDMINER_* variables its role reads; an
// unset (or empty) variable leaves its field as the initializer says.
struct JobEnvironment {
  // Where the trainer listens and its workers connect.
  std::string listen;       // GOLDMINER_LISTEN
  std::string rank_listen;  // GOLDMINER_RANK_LISTEN
  std::string trainer;      // GOLDMINER_TRAINER
  int ucx_port = 0;         // GOLDMINER_UCX_PORT
  int rank_ucx_port = 0;    // GOLDMINER_RANK_UCX_PORT
  std::optional<uint32_t> local_workers;  // GOLDMINER_LOCAL_WORKERS

  // How the session and its workers prove uid and job to each other.
  std::string auth;                   // GOLDMINER_AUTH: "", "munge" or "secret"
  uint32_t auth_job = 0;              // GOLDMINER_AUTH_JOB
  std::string munge_socket;           // GOLDMINER_MUNGE_SOCKET
  std::optional<std::string> secret;  // GOLDMINER_SECRET (set but empty is kept: an error later)
  std::string secret_file;            // GOLDMINER_SECRET_FILE

  // The job's data workers.
  uint32_t dw_job = 0;      // GOLDMINER_DW_JOB
  std::string dw_error;     // GOLDMINER_DW_ERROR
  std::string dw_program;   // GOLDMINER_DW_PROGRAM
  std::string python;       // GOLDMINER_PYTHON
  // The trainer's container, which its workers' Python processes enter
  // (launch/container_image.h).
  std::string container_image;    // GOLDMINER_CONTAINER_IMAGE
  std::string container_runtime;  // GOLDMINER_CONTAINER_RUNTIME
  std::string container_mounts;   // GOLDMINER_CONTAINER_MOUNTS
  std::string dw_bind;      // GOLDMINER_DW_BIND
  std::optional<int> dw;           // GOLDMINER_DW
  std::optional<int> dw_max;       // GOLDMINER_DW_MAX
  std::optional<int> cpus_per_dw;  // GOLDMINER_CPUS_PER_DW
  std::string mode;                // GOLDMINER_MODE
  std::string dw_sbatch;           // GOLDMINER_DW_SBATCH (shell words)
  std::optional<double> autoscale_interval_s;  // GOLDMINER_AUTOSCALE_INTERVAL
  std::string ctld;                // GOLDMINER_CTLD
  std::string ctld_user;           // GOLDMINER_CTLD_USER

  // Each variable of the role that was set, in the table's order: its
  // name and value as read (for --print-config).
  std::vector<std::pair<std::string, std::string>> read;
};

// One row of the contract.
struct JobEnvironmentVariable {
  std::string name;       // GOLDMINER_...
  std::string value_doc;  // e.g. "N", "PORT", "ucx://HOST:PORT"
  unsigned readers = 0;   // JobEnvironmentReader bits
  std::string help;       // one or more plain sentences, no trailing period
  // "" when the value is acceptable, else why not (gmcore/option_table.h's
  // ValueCheck; not included here, so that a namespace `split` can include
  // this header); null: any text.
  std::function<std::string(const std::string&)> check;
  bool secret = false;    // never printed
  bool empty_is_set = false;  // set but empty means something (an error later), not "unset"
  // Set by the SPANK plugin for a --goldminer job (or documented with what
  // it sets, as GOLDMINER_AUTOSCALE_INTERVAL), not by the user or
  // goldminer-run alone.
  bool job_page = true;
  // Stores a value that passed `check` into its field (null: read by no
  // process, only documented).
  std::function<void(JobEnvironment*, const std::string&)> store;
};

// The contract, in man-page order.
const std::vector<JobEnvironmentVariable>& job_environment_table();

// Reads the variables whose rows name READER from ENV ("NAME=value", as
// process_environment() gives it). A value its row's check refuses is an
// error naming the variable, the value and what was expected.
Expected<JobEnvironment> read_job_environment(const std::vector<std::string>& env, unsigned reader);

// The same from this process's environment.
Expected<JobEnvironment> process_job_environment(unsigned reader);

// What a process of READER read, one line per variable of its role:
// "NAME=VALUE  # environment" or "# NAME unset" (a secret's value is not
// shown, only its length).
std::string describe_job_environment(const JobEnvironment& read, unsigned reader);

// The variables one step's processes get from the SPANK plugin, composed
// by launch/ (job_settings, companion_job, het_step) and set by the plugin
// in one call per hook. A name set twice keeps one entry, the last value
// (a heterogeneous job's GOLDMINER_DW is its workers' component's tasks,
// not the option's count).
class JobVariables {
 public:
  JobVariables() = default;
  explicit JobVariables(const std::vector<std::pair<std::string, std::string>>& vars) { add(vars); }
  void set(const std::string& name, const std::string& value);
  void add(const std::vector<std::pair<std::string, std::string>>& vars);
  const std::vector<std::pair<std::string, std::string>>& list() const { return vars_; }
  bool empty() const { return vars_.empty(); }
  // Each GOLDMINER_* name is a row of job_environment_table() and its value
  // passes the row's check (what its readers will apply); an error names
  // the first that does not. Other names (UCX_*) are the job's own.
  Status check() const;

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

// The man page rows (.TP) of the variables READER reads.
std::string render_man_job_environment(unsigned reader);
// Those of the variables the SPANK plugin sets (job_page).
std::string render_man_plugin_environment();

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_JOB_ENVIRONMENT_H_
