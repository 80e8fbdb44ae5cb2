/* The C interface of select/goldminer_cons_tres to the Slurm-free
 * scheduler core: its settings (goldminer.conf, sched/select_config.h), the
 * plan of one job_test call (sched/select_policy.h), the data-worker check
 * (sched/data_worker.h) and the log line of a decision. The select plugin
 * is written in C because Slurm's internal headers are C only; it fills
 * these plain records from Slurm's structures and never sees C++.
 *
 * Every function here catches every exception: nothing ever unwinds into
 * slurmctld. A failure is a return value with the reason in `err`, and the
 * plugin then lets cons_tres decide as if we were not there. */
#ifndef GOLDMINER_SCHED_SELECT_DECISION_H_
#define GOLDMINER_SCHED_SELECT_DECISION_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Mirrors Slurm's SELECT_MODE_RUN_NOW/TEST_ONLY/WILL_RUN. */
enum gm_job_test_mode { GM_MODE_RUN_NOW = 0, GM_MODE_TEST_ONLY = 1, GM_MODE_WILL_RUN = 2 };

/* ---------------------------------------------------------- settings */
struct gm_select_config; /* opaque; immutable once loaded */

/* Loads goldminer.conf from the directory of `slurm_conf_path` (absent:
 * the defaults). NULL on a bad file, with "PATH:LINE: KEY: invalid value
 * 'V': WHY" in err. */
struct gm_select_config *gm_select_config_load(const char *slurm_conf_path, char *err, size_t len);
void gm_select_config_free(struct gm_select_config *config);
/* 1 with mode=observe. */
int gm_select_config_observe(const struct gm_select_config *config);
/* "reserve_cpus_per_gpu=1 mode=enforce max_dw_per_job=64
 * max_cpus_per_dw=16" into buf, snprintf-like. */
size_t gm_select_config_describe(const struct gm_select_config *config, char *buf, size_t len);

/* ---------------------------------------------------------- one call */
enum gm_job_kind { GM_JOB_GPU = 0, GM_JOB_CPU = 1, GM_JOB_DATA_WORKER = 2 };

struct gm_node_usage {
  uint32_t cores_total;
  uint32_t cores_free; /* not allocated, not excluded for this call */
  uint32_t cpus_per_core;
  uint32_t gpus_total;
  uint32_t gpus_free;
};

struct gm_node_plan {
  int usable;            /* 0: clear the node from the candidates */
  uint32_t hidden_cores; /* cores to hide (exclude) from cons_tres */
  int hide_allocated;    /* 0: hide free cores only (run-now); 1: any
                          * cores not already excluded, allocated now or
                          * not (will-run: the reserve when they free up) */
  int tier;              /* offered from this tier on */
};

struct gm_plan_summary {
  int tiers;   /* tiers to try, 1..3 */
  int narrows; /* 0: the call goes to cons_tres as given */
  uint32_t nodes_dropped;
  uint32_t cores_hidden;
};

/* Fills out[0..n) and summary. 0 on success; -1 with the reason in err on
 * any internal failure (out and summary are then unspecified). */
int gm_plan_job_test(const struct gm_select_config *config, int job_kind, int mode,
                     const struct gm_node_usage *nodes, size_t n, struct gm_node_plan *out,
                     struct gm_plan_summary *summary, char *err, size_t len);

/* 1 if a job_record_t TRES string (tres_per_job/node/socket/task) asks for
 * a GPU; 0 otherwise (also on internal error). */
int gm_tres_requests_gpu(const char *tres);

/* ---------------------------------------------------------- data workers */
/* J of a job named "goldminer-dw.J"; 0 otherwise. */
uint32_t gm_companion_trainer_id(const char *job_name);

struct gm_worker_claim {
  uint32_t worker_uid;
  uint32_t worker_cpus;
  int trainer_found;
  uint32_t trainer_uid;
  int trainer_running;
  const char *const *trainer_spank_env; /* job_record_t spank_job_env */
  uint32_t trainer_spank_env_size;
  uint32_t cpus_held; /* by the trainer's other running companion jobs */
};

/* 1: verified under config's site limits (goldminer.conf max_dw_per_job,
 * max_cpus_per_dw); 0: not, with why in `why`; -1: internal error (in
 * `why`), also for a NULL config or claim. */
int gm_verify_data_worker(const struct gm_select_config *config, uint32_t trainer_id,
                          const struct gm_worker_claim *claim, char *why, size_t len);

/* ---------------------------------------------------------- log line */
struct gm_job_test_record {
  uint32_t job_id;
  uint32_t het_job_id;     /* 0 unless a het component */
  uint32_t het_job_offset;
  int mode;                /* gm_job_test_mode */
  uint32_t min_nodes, max_nodes, req_nodes;
  uint32_t candidate_nodes; /* nodes slurmctld offered, before narrowing */
  int rc;                   /* cons_tres's answer, 0 = success */
  const char *selected;     /* node list cons_tres chose, or NULL */
  const char *gres;         /* the job's GRES request, or NULL */
  const char *policy;       /* what the plugin did, or NULL: "cpu job: ..." */
  double policy_us;         /* time in our code, every cons_tres call excluded */
  double cons_tres_us;      /* the cons_tres call whose answer was used: what
                             * plain cons_tres would have spent */
  double tiers_us;          /* cons_tres calls on placement tiers tried before
                             * that one (0: none); added by the plugin too */
};

/* Writes the one-line description of `record` into buf (always
 * NUL-terminated, truncated to len) and returns the full length it needed,
 * like snprintf. Returns 0 and writes "" on internal error. */
size_t gm_format_job_test(const struct gm_job_test_record *record, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* GOLDMINER_SCHED_SELECT_DECISION_H_ */
