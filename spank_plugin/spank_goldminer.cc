// spank_goldminer.so: `--goldminer[=key=value,...]` for sbatch, salloc and
// srun. The only file that speaks SPANK: it registers the option, hands
// values to the Slurm-free core (gmcore/job_settings.h) and maps its answers
// to SPANK return codes. This is the one switch on spank_context()
// (STYLE.md §1). No exception leaves an entry point (STYLE.md §2).
extern "C" {
#include <slurm/spank.h>
}

#include <exception>
#include <string>
#include <vector>

#include "gmcore/job_options.h"
#include "gmcore/job_settings.h"
#include "gmcore/log.h"

// SPANK_PLUGIN() defines these; in C++ they need C linkage declared first.
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
int slurm_spank_init(spank_t sp, int ac, char** av);
int slurm_spank_user_init(spank_t sp, int ac, char** av);
int slurm_spank_exit(spank_t sp, int ac, char** av);
}
SPANK_PLUGIN(goldminer, 1)

namespace {

goldminer::JobSettings settings;
std::string option_usage;  // must outlive the registration

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

// Remote (slurmstepd): give every task of the step the job's settings.
int export_environment(spank_t sp) {
  for (const auto& [name, value] : settings.take_environment()) {
    spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
    if (rc != ESPANK_SUCCESS) {
      slurm_error("goldminer: cannot set %s in the job environment: %s", name.c_str(),
                  spank_strerror(rc));
      return -1;
    }
  }
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
      case S_CTX_REMOTE:     // slurmstepd: the option callback runs here too
        return register_option(sp);
      case S_CTX_SLURMD:  // plugstack.conf was checked above; nothing else
      case S_CTX_JOB_SCRIPT:
      case S_CTX_ERROR:
        return 0;
    }
    return 0;
  });
}

extern "C" int slurm_spank_user_init(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("user_init", [&] {
    return spank_context() == S_CTX_REMOTE ? export_environment(sp) : 0;
  });
}

extern "C" int slurm_spank_exit(spank_t /*sp*/, int /*ac*/, char** /*av*/) {
  return guarded("exit", [&] {
    goldminer::log::set_sink(nullptr);
    return 0;
  });
}
