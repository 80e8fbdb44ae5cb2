#include "sched/select_decision.h"

#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sched/data_worker.h"
#include "sched/select_config.h"
#include "sched/select_policy.h"

struct gm_select_config {
  goldminer::SelectConfig config;
};

namespace {

// snprintf-like copy; returns the length `text` needed.
size_t copy_out(const std::string& text, char* buf, size_t len) {
  if (buf && len > 0) {
    size_t n = text.size() < len - 1 ? text.size() : len - 1;
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return text.size();
}

const char* mode_name(int mode) {
  switch (mode) {
    case GM_MODE_RUN_NOW: return "run_now";
    case GM_MODE_TEST_ONLY: return "test_only";
    case GM_MODE_WILL_RUN: return "will_run";
    default: return "unknown_mode";
  }
}

std::string describe(const gm_job_test_record& r) {
  std::string out = "job_test job " + std::to_string(r.job_id);
  if (r.het_job_id != 0)
    out += " (het " + std::to_string(r.het_job_id) + "+" + std::to_string(r.het_job_offset) + ")";
  out += std::string(" mode ") + mode_name(r.mode);
  out += " nodes " + std::to_string(r.min_nodes) + "-" + std::to_string(r.max_nodes);
  if (r.req_nodes != r.min_nodes) out += " req " + std::to_string(r.req_nodes);
  if (r.gres && *r.gres) out += std::string(" gres ") + r.gres;
  out += " candidates " + std::to_string(r.candidate_nodes);
  if (r.policy && *r.policy) out += std::string(" [") + r.policy + "]";
  if (r.rc == 0)
    out += std::string(" -> selected ") + (r.selected && *r.selected ? r.selected : "(none)");
  else
    out += " -> refused rc " + std::to_string(r.rc);
  if (r.policy_us > 0 || r.cons_tres_us > 0 || r.tiers_us > 0) {
    char times[128];
    if (r.tiers_us > 0)
      std::snprintf(times, sizeof(times), " (us ours %.1f cons_tres %.1f tiers %.1f)", r.policy_us, r.cons_tres_us,
                    r.tiers_us);
    else
      std::snprintf(times, sizeof(times), " (us ours %.1f cons_tres %.1f)", r.policy_us, r.cons_tres_us);
    out += times;
  }
  return out;
}

}  // namespace

extern "C" {

gm_select_config* gm_select_config_load(const char* slurm_conf_path, char* err, size_t len) {
  try {
    std::string path = goldminer::select_config_path(slurm_conf_path ? slurm_conf_path : "");
    auto loaded = goldminer::load_select_config(path);
    if (!loaded.ok()) {
      copy_out(loaded.status().message(), err, len);
      return nullptr;
    }
    return new gm_select_config{*loaded};
  } catch (const std::exception& e) {
    copy_out(std::string("internal error loading goldminer.conf: ") + e.what(), err, len);
  } catch (...) {
    copy_out("internal error loading goldminer.conf", err, len);
  }
  return nullptr;
}

void gm_select_config_free(gm_select_config* config) { delete config; }

int gm_select_config_observe(const gm_select_config* config) {
  return config && config->config.mode == goldminer::SelectConfig::Mode::kObserve;
}

size_t gm_select_config_describe(const gm_select_config* config, char* buf, size_t len) {
  try {
    if (!config) return copy_out("(no settings)", buf, len);
    std::ostringstream out;
    out << "reserve_cpus_per_gpu=" << config->config.reserve_cpus_per_gpu << " mode="
        << (config->config.mode == goldminer::SelectConfig::Mode::kObserve ? "observe" : "enforce");
    out << " max_dw_per_job=" << config->config.max_dw_per_job
        << " max_cpus_per_dw=" << config->config.max_cpus_per_dw;
    if (config->config.inject_fault) out << " inject_fault=decision";
    return copy_out(out.str(), buf, len);
  } catch (...) {
    return copy_out("", buf, len);
  }
}

int gm_plan_job_test(const gm_select_config* config, int job_kind, int mode, const gm_node_usage* nodes,
                     size_t n, gm_node_plan* out, gm_plan_summary* summary, char* err, size_t len) {
  try {
    if (!config || (n > 0 && (!nodes || !out)) || !summary) throw std::invalid_argument("null argument");
    if (config->config.inject_fault) throw std::runtime_error("fault injected (inject_fault=decision)");
    if (job_kind < GM_JOB_GPU || job_kind > GM_JOB_DATA_WORKER) throw std::invalid_argument("bad job kind");
    if (mode < GM_MODE_RUN_NOW || mode > GM_MODE_WILL_RUN) throw std::invalid_argument("bad mode");
    std::vector<goldminer::NodeUsage> usage(n);
    for (size_t i = 0; i < n; ++i) {
      usage[i].cores_total = nodes[i].cores_total;
      usage[i].cores_free = nodes[i].cores_free;
      usage[i].cpus_per_core = nodes[i].cpus_per_core;
      usage[i].gpus_total = nodes[i].gpus_total;
      usage[i].gpus_free = nodes[i].gpus_free;
    }
    goldminer::JobTestPlan plan = goldminer::plan_job_test(
        config->config, static_cast<goldminer::JobKind>(job_kind), static_cast<goldminer::TestMode>(mode), usage);
    for (size_t i = 0; i < n; ++i) {
      out[i].usable = plan.nodes[i].usable;
      out[i].hidden_cores = plan.nodes[i].hidden_cores;
      out[i].hide_allocated = plan.nodes[i].hide_allocated;
      out[i].tier = plan.nodes[i].tier;
    }
    summary->tiers = plan.tiers;
    summary->narrows = plan.narrows;
    summary->nodes_dropped = plan.nodes_dropped;
    summary->cores_hidden = plan.cores_hidden;
    return 0;
  } catch (const std::exception& e) {
    copy_out(std::string("internal error: ") + e.what(), err, len);
  } catch (...) {
    copy_out("internal error", err, len);
  }
  return -1;
}

int gm_tres_requests_gpu(const char* tres) {
  try {
    return goldminer::tres_requests_gpu(tres) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

uint32_t gm_companion_trainer_id(const char* job_name) {
  try {
    return goldminer::companion_trainer_id(job_name);
  } catch (...) {
    return 0;
  }
}

int gm_verify_data_worker(const gm_select_config* config, uint32_t trainer_id, const gm_worker_claim* claim,
                          char* why, size_t len) {
  try {
    if (!config) throw std::invalid_argument("no settings");
    if (!claim) throw std::invalid_argument("null claim");
    goldminer::WorkerClaim c;
    c.worker_uid = claim->worker_uid;
    c.worker_cpus = claim->worker_cpus;
    c.trainer_found = claim->trainer_found != 0;
    c.trainer_uid = claim->trainer_uid;
    c.trainer_running = claim->trainer_running != 0;
    c.trainer_option =
        goldminer::goldminer_option_in_spank_env(claim->trainer_spank_env, claim->trainer_spank_env_size);
    c.cpus_held = claim->cpus_held;
    std::string reason = goldminer::verify_data_worker(trainer_id, c, config->config);
    copy_out(reason, why, len);
    return reason.empty() ? 1 : 0;
  } catch (const std::exception& e) {
    copy_out(std::string("internal error: ") + e.what(), why, len);
  } catch (...) {
    copy_out("internal error", why, len);
  }
  return -1;
}

size_t gm_format_job_test(const gm_job_test_record* record, char* buf, size_t len) {
  try {
    return copy_out(record ? describe(*record) : std::string("job_test (no record)"), buf, len);
  } catch (...) {  // the caller is slurmctld: nothing may escape
    if (buf && len > 0) buf[0] = '\0';
    return 0;
  }
}

}  // extern "C"
