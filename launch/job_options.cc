#include "launch/job_options.h"

#include <algorithm>

namespace goldminer {
namespace {

const char* name(Transport t) { return t == Transport::kMpi ? "mpi" : "ucx"; }
const char* name(ScalingMode m) { return m == ScalingMode::kStatic ? "static" : "elastic"; }

Status invalid(const std::string& key, const std::string& value, const std::string& why) {
  return Status::error("goldminer: " + key + ": invalid value '" + value + "': " + why);
}

// The value of each key of the table, as the user would write it.
std::string value_of(const JobOptions& o, const std::string& key) {
  if (key == "dw") return std::to_string(o.dw);
  if (key == "dw-max") return std::to_string(o.dw_max);
  if (key == "cpus-per-dw") return std::to_string(o.cpus_per_dw);
  if (key == "transport") return name(o.transport);
  if (key == "mode") return name(o.mode);
  return "";
}

std::string site_value_of(const AdminConfig& a, const std::string& key) {
  if (key == "dw_partition") return a.dw_partition;
  if (key == "dw_qos") return a.dw_qos;
  // How an elastic session reaches goldminer-ctld: only where there is one.
  if (key == "ctld") return a.ctld;
  if (key == "ctld_user") return a.ctld.empty() ? "" : a.ctld_user;
  if (key == "munge_socket") return a.ctld.empty() ? "" : a.munge_socket;
  return "";
}

}  // namespace

const OptionTable& job_option_table() {
  static const OptionTable table = {
      {"dw", "1", "N", "data workers started with the job", integer_at_least(0), "GOLDMINER_DW"},
      {"dw-max", "8", "N",
       "most data workers the job may grow to (capped by the site's max_dw_per_job)",
       integer_at_least(1), "GOLDMINER_DW_MAX"},
      {"cpus-per-dw", "2", "N", "CPUs of each data worker", integer_in_range(1, kMaxDataWorkerThreads),
       "GOLDMINER_CPUS_PER_DW"},
      {"transport", "ucx", "ucx|mpi",
       "how batches reach the trainer: ucx (workers may join at any time) or mpi (static "
       "companion steps in one MPI_COMM_WORLD)",
       one_of({"ucx", "mpi"}), "GOLDMINER_TRANSPORT"},
      {"mode", "elastic", "elastic|static",
       "elastic: the scheduler adds and removes data workers while the job runs; static: "
       "exactly dw workers for the job's life (the default with transport=mpi)",
       one_of({"elastic", "static"}), "GOLDMINER_MODE"},
  };
  return table;
}

std::string JobOptions::canonical() const {
  std::string out;
  for (const auto& row : job_option_table()) {
    if (!out.empty()) out += ",";
    out += row.key + "=" + value_of(*this, row.key);
  }
  return out;
}

Expected<JobOptions> parse_job_options(const std::string& text, const AdminConfig& admin) {
  if (text.size() > kMaxJobOptionsLength)
    return Status::error("goldminer: the option's value is " + std::to_string(text.size()) +
                         " bytes long, more than the limit of " + std::to_string(kMaxJobOptionsLength) +
                         " (keys: dw, dw-max, cpus-per-dw, transport, mode)");
  auto values = parse_options(job_option_table(), split(text, ','), "goldminer");
  if (!values.ok()) return values.status();

  JobOptions o;
  o.dw = static_cast<int>(values->integer("dw"));
  o.dw_max = static_cast<int>(values->integer("dw-max"));
  o.cpus_per_dw = static_cast<int>(values->integer("cpus-per-dw"));
  o.transport = values->text("transport") == "mpi" ? Transport::kMpi : Transport::kUcx;
  o.mode = values->text("mode") == "static" ? ScalingMode::kStatic : ScalingMode::kElastic;

  const std::string limit_note = " (plugstack.conf max_dw_per_job)";
  if (values->was_given("dw-max")) {
    if (o.dw_max > admin.max_dw_per_job)
      return invalid("dw-max", values->text("dw-max"),
                     "exceeds this cluster's limit of " + std::to_string(admin.max_dw_per_job) +
                         limit_note);
  } else {
    o.dw_max = std::min(o.dw_max, admin.max_dw_per_job);
    // An explicit dw above the default ceiling raises the ceiling with it.
    o.dw_max = std::max(o.dw_max, std::min(o.dw, admin.max_dw_per_job));
  }
  if (o.dw > o.dw_max)
    return invalid("dw", values->text("dw"),
                   "more than dw-max (" + std::to_string(o.dw_max) + ")" +
                       (values->was_given("dw-max") ? "" : limit_note));
  if (o.cpus_per_dw > admin.max_cpus_per_dw)
    return invalid("cpus-per-dw", values->text("cpus-per-dw"),
                   "exceeds this cluster's limit of " + std::to_string(admin.max_cpus_per_dw) +
                       " (plugstack.conf max_cpus_per_dw)");
  if (o.transport == Transport::kMpi) {
    if (values->was_given("mode") && o.mode == ScalingMode::kElastic)
      return invalid("mode", "elastic",
                     "transport=mpi runs a fixed set of workers; use mode=static or transport=ucx");
    o.mode = ScalingMode::kStatic;
  }
  return o;
}

std::vector<std::pair<std::string, std::string>> job_environment(const JobOptions& options,
                                                                 const AdminConfig& admin) {
  // The tables' env column names the variables, as in the man page.
  std::vector<std::pair<std::string, std::string>> env;
  for (const auto& row : job_option_table())
    if (!row.env.empty()) env.emplace_back(row.env, value_of(options, row.key));
  // Unset site settings mean "the job's own"; an empty variable would not.
  for (const auto& row : admin_option_table()) {
    std::string value = site_value_of(admin, row.key);
    if (!row.env.empty() && !value.empty()) env.emplace_back(row.env, value);
  }
  env.emplace_back("GOLDMINER_OPTIONS", options.canonical());
  return env;
}

std::string job_option_usage() {
  // Key names only: sbatch wraps this text at 80 columns and would break
  // long key=a|b tokens mid-word.
  std::string keys;
  for (const auto& row : job_option_table()) {
    if (!keys.empty()) keys += ", ";
    keys += row.key;
  }
  return "[goldminer] run this job's data pre-processing on elastic data workers; keys: " + keys +
         " (see spank_goldminer(8))";
}

}  // namespace goldminer
