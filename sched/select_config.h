// goldminer.conf: the settings of select/goldminer_cons_tres, one strict
// file beside slurm.conf (STYLE.md §3: one table drives parsing, the man
// page and the errors). Lines are `key=value`; '#' starts a comment; blank
// lines are ignored. An unknown key, a key given twice, a line that is not
// key=value or a value failing its check is an error naming the file, the
// line and the reason; the plugin then runs as plain cons_tres (it never
// refuses to start: slurmctld and every client load select plugins).
#ifndef GOLDMINER_SCHED_SELECT_CONFIG_H_
#define GOLDMINER_SCHED_SELECT_CONFIG_H_

#include <string>

#include "gmcore/option_table.h"
#include "gmcore/status.h"

namespace goldminer {

// Value type.
struct SelectConfig {
  // enforce: narrow what cons_tres may choose; observe: log what enforce
  // would have done and hand cons_tres the call unchanged.
  enum class Mode { kEnforce, kObserve };
  // CPUs held back next to each free GPU for the GPU jobs that may take
  // it; 0 turns the reserve off (data workers still go to stranded CPUs
  // first).
  double reserve_cpus_per_gpu = 1.0;
  Mode mode = Mode::kEnforce;
  // The site's data-worker limits (plugstack.conf's max_dw_per_job and
  // max_cpus_per_dw, same defaults and checks): slurmctld does not read
  // plugstack.conf, so a verified worker job's CPUs are bounded by these
  // (data_worker.h). The site gives both files the same values.
  int max_dw_per_job = 64;
  int max_cpus_per_dw = 16;
  // For tests only: every decision fails as an internal error would, so
  // that the fallback to cons_tres's own decision can be seen.
  bool inject_fault = false;
};

const OptionTable& select_option_table();

// Parses the text of goldminer.conf; `path` names the file in errors:
// "PATH:LINE: KEY: invalid value 'V': WHY".
Expected<SelectConfig> parse_select_config(const std::string& text, const std::string& path);

// Reads and parses `path`; a file that does not exist gives the defaults
// (a site that has not written one gets the documented behaviour), any
// other read error is an error naming the path.
Expected<SelectConfig> load_select_config(const std::string& path);

// goldminer.conf in the directory of `slurm_conf_path`.
std::string select_config_path(const std::string& slurm_conf_path);

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_SELECT_CONFIG_H_
