/*
 * The line between select/goldminer_cons_tres's release-independent part
 * (narrowing.c, cons_tres.c), the entry points the supported releases
 * share (ops_common.c, version guards where they part) and the one file
 * per Slurm release that keeps what only that release has (ops_22_05.c,
 * ops_24_11.c, ops_25_11.c for 25.11 and 26.05, chosen by configure from the Slurm version it
 * finds).
 *
 * Adding a release:
 *  1. compare the release's slurm_select_ops_t and node_select_syms[] in
 *     src/interfaces/select.c (src/common/select.c before 23.02) and its
 *     select_cons_tres.c's init/fini with ops_common.c's table: entry
 *     points the release lacks or changed go behind a version guard
 *     there; those only it has go to a new ops_MAJOR_MINOR.c (copy the
 *     nearest), with their own table and symbol names (same order);
 *  2. set plugin_id there: unique (190) where slurmctld loads every select
 *     plugin and refuses duplicates (22.05, 24.11), cons_tres's own (109)
 *     where it enables cons_tres features by the id (25.05 on); init and fini
 *     with the release's return types;
 *  3. if job_test's exclusion argument changed, implement struct gm_call,
 *     gm_shim_core_excluded and gm_shim_cons_tres_job_test over it in the
 *     release's file (as ops_22_05.c does);
 *  4. add the version to the case in configure.ac, SELECT_OPS_* in
 *     Makefile.am, the release to SLURM_RELEASES in
 *     scripts/install-deps.sh and to scripts/run-tests, then run
 *     scripts/run-tests --slurm MAJOR.MINOR.
 * Library changes that are not in the ops table (e.g. add_job_to_cores
 * lost an argument in 24.11) are version guards in narrowing.c.
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

/* The release-independent job_test (narrowing.c): decides, narrows and
 * calls gm_shim_cons_tres_job_test (once, or once per placement tier). */
int gm_job_test(job_record_t *job_ptr, bitstr_t *node_bitmap,
		uint32_t min_nodes, uint32_t max_nodes, uint32_t req_nodes,
		uint16_t mode, list_t *preemptee_candidates,
		struct gm_call *call);

/* Node or job allocations changed: the next job_test rebuilds its view. */
void gm_usage_changed(void);

/* Loads or reloads goldminer.conf (init, reconfigure). */
void gm_load_settings(void);
void gm_free_settings(void);

/* cons_tres symbols to resolve: `n` names into `slots`, in order (a
 * struct of function pointers, one per name). */
struct gm_syms {
	const char *const *names;
	void **slots;
	size_t n;
};
/* The gm_syms of an array of names and the struct they fill; the file
 * that owns them checks that they match (GM_SYMS_MATCH). */
#define GM_SYMS(names, table) \
	{ (names), (void **) &(table), sizeof(names) / sizeof((names)[0]) }
#define GM_SYMS_MATCH(names, table) \
	_Static_assert(sizeof(names) / sizeof((names)[0]) * sizeof(void *) == \
			       sizeof(table), \
		       "one symbol name per slot of " #table)

/* Loads cons_tres and resolves the `count` tables' symbols (its init runs
 * once all resolved). */
int gm_load_cons_tres(const struct gm_syms *tables, size_t count);
void gm_unload_cons_tres(void);

/* The plugin's init and fini but for their return types, which differ by
 * release (ops_common.c): loads cons_tres with the shared entry points and
 * the release's own (`release`, NULL: none), then goldminer.conf in
 * slurmctld; fini undoes it. */
int gm_ops_init(const struct gm_syms *release);
void gm_ops_fini(void);

extern const char plugin_type[];

#endif /* GOLDMINER_SELECT_PLUGIN_SHIM_H_ */
