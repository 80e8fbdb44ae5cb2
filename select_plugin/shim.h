/*
 * The line between select/goldminer_cons_tres's release-independent part
 * (goldminer_job_test.c, cons_tres.c) and the one file per Slurm release
 * that knows that release's select ops table and job_test arguments
 * (ops_22_05.c, ops_24_11.c, ops_26_05.c, chosen by configure from the
 * Slurm version it finds).
 *
 * Adding a release:
 *  1. copy the nearest ops_*.c to ops_MAJOR_MINOR.c; make its ops struct,
 *     symbol list (same order) and select_p_* signatures those of the
 *     release's slurm_select_ops_t and node_select_syms[] in
 *     src/interfaces/select.c (src/common/select.c before 23.02), and
 *     its init/fini those of the release's select_cons_tres.c;
 *  2. set plugin_id: unique (190) where slurmctld loads every select
 *     plugin and refuses duplicates (22.05, 24.11), cons_tres's own (109)
 *     where it enables cons_tres features by the id (26.05);
 *  3. implement gm_shim_core_excluded and gm_shim_cons_tres_job_test over
 *     the release's job_test exclusion argument (struct gm_call);
 *  4. add the version to the case in configure.ac, SELECT_OPS_* in
 *     Makefile.am, the release to SLURM_RELEASES in
 *     scripts/install-deps.sh and to scripts/run-tests, then run
 *     scripts/run-tests --slurm MAJOR.MINOR.
 * Library changes that are not in the ops table (e.g. add_job_to_cores
 * lost an argument in 24.11) are version guards in goldminer_job_test.c.
 */
#ifndef GOLDMINER_SELECT_PLUGIN_SHIM_H_
#define GOLDMINER_SELECT_PLUGIN_SHIM_H_

#include "config.h"

#include "src/common/bitstring.h"
#include "src/common/list.h"
#include "src/slurmctld/slurmctld.h"
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
#include "src/interfaces/select.h"
#else
#include "src/common/select.h"
#endif

#if SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(23, 2, 0)
/* The names later releases use for Slurm's list types (24.11 has no
 * List any more). */
typedef struct xlist list_t;
typedef struct listIterator list_itr_t;
#endif

/* One job_test call's release-specific arguments, owned by the ops file. */
struct gm_call;

/* Whether the caller already excluded core `core` of node `node_inx`
 * (an advanced reservation's cores). */
bool gm_shim_core_excluded(const struct gm_call *call, int node_inx, int core);

/* Calls cons_tres's job_test with the call's own arguments but these
 * candidate nodes (in/out, as Slurm's), these preemption candidates, and,
 * on top of the caller's exclusion, the cores set in hidden[node] for
 * each node whose entry is not NULL (hidden may be NULL: none). */
int gm_shim_cons_tres_job_test(struct gm_call *call, bitstr_t *node_bitmap,
			       bitstr_t **hidden,
			       list_t *preemptee_candidates);

/* The release-independent job_test: decides, narrows and calls
 * gm_shim_cons_tres_job_test (once, or once per placement tier). */
int gm_job_test(job_record_t *job_ptr, bitstr_t *node_bitmap,
		uint32_t min_nodes, uint32_t max_nodes, uint32_t req_nodes,
		uint16_t mode, list_t *preemptee_candidates,
		struct gm_call *call);

/* Node or job allocations changed: the next job_test rebuilds its view. */
void gm_usage_changed(void);

/* Loads or reloads goldminer.conf (init, reconfigure). */
void gm_load_settings(void);
void gm_free_settings(void);

/* Loads cons_tres and resolves the release's `n` symbol names into
 * `slots` (the release's ops table, in order). */
int gm_load_cons_tres(const char *const *syms, void **slots, size_t n);
void gm_unload_cons_tres(void);

extern const char plugin_type[];

#endif /* GOLDMINER_SELECT_PLUGIN_SHIM_H_ */
