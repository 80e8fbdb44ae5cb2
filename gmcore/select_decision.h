/* What select/goldminer_cons_tres decided for one job_test call, as plain
 * values, and its log line. C-callable: the select plugin is written in C
 * because Slurm's internal headers are C only; it fills this record from
 * job_record_t and never sees C++. */
#ifndef GOLDMINER_GMCORE_SELECT_DECISION_H_
#define GOLDMINER_GMCORE_SELECT_DECISION_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Mirrors Slurm's SELECT_MODE_RUN_NOW/TEST_ONLY/WILL_RUN. */
enum gm_job_test_mode { GM_MODE_RUN_NOW = 0, GM_MODE_TEST_ONLY = 1, GM_MODE_WILL_RUN = 2 };

struct gm_job_test_record {
  uint32_t job_id;
  uint32_t het_job_id;     /* 0 unless a het component */
  uint32_t het_job_offset;
  int mode;                /* gm_job_test_mode */
  uint32_t min_nodes, max_nodes, req_nodes;
  uint32_t candidate_nodes; /* nodes offered to cons_tres */
  int rc;                   /* cons_tres's answer, 0 = success */
  const char *selected;     /* node list cons_tres chose, or NULL */
  const char *gres;         /* the job's GRES request, or NULL */
};

/* Writes the one-line description of `record` into buf (always
 * NUL-terminated, truncated to len) and returns the full length it needed,
 * like snprintf. Never throws; returns 0 and writes "" on internal error. */
size_t gm_format_job_test(const struct gm_job_test_record *record, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* GOLDMINER_GMCORE_SELECT_DECISION_H_ */
