/*
 * select/goldminer_cons_tres on Slurm 26.05: the release's select ops
 * table (13 select_p_* and plugin_id, as src/interfaces/select.c lists
 * them; node and job info, state save and steps left the interface).
 * Every select_p_* but job_test delegates to cons_tres (loaded by
 * cons_tres.c); those that change allocations tell the job_test view
 * (gm_usage_changed); job_test goes through the release-independent
 * gm_job_test (goldminer_job_test.c) with 26.05's arguments behind
 * struct gm_call (shim.h says how to add a release). job_test's
 * arguments are 24.11's: struct gm_call is ops_24_11.c's.
 *
 * 26.05's slurmctld loads only SelectType and treats the cluster as
 * cons_tres (GPU requests, CR_Core, CoreCnt reservations) only when the
 * loaded plugin's plugin_id is cons_tres's own (running_cons_tres()): this
 * wrapper reports cons_tres's id, 109. init returns int, fini nothing.
 *
 * Written in C: Slurm's internal headers do not compile as C++ (STYLE.md
 * §1-2); the policy is in the Slurm-free core (sched/select_decision.h).
 */
/* First: it renames the libslurm functions the headers below declare. */
#include "config.h"
#include "src/common/slurm_xlator.h"

#include "select_plugin/shim.h"
#include "src/common/node_conf.h"
#include "src/common/run_in_daemon.h"
#include "src/interfaces/select.h"

const char plugin_name[] = "GoldMiner select plugin (wraps cons_tres)";
const char plugin_type[] = "select/goldminer_cons_tres";
/* cons_tres's own id: 26.05 enables its cons_tres features by the id. */
const uint32_t plugin_id = SELECT_PLUGIN_CONS_TRES;
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

/* 26.05's slurm_select_ops_t is private to src/interfaces/select.c: the
 * same table, in the same order as the symbol names below. */
typedef struct {
	uint32_t *plugin_id;
	int (*node_init)(void);
	int (*job_test)(job_record_t *job_ptr, bitstr_t *bitmap,
			uint32_t min_nodes, uint32_t max_nodes,
			uint32_t req_nodes, uint16_t mode,
			list_t *preemptee_candidates,
			list_t **preemptee_job_list,
			resv_exc_t *resv_exc_ptr,
			will_run_data_t *will_run_ptr);
	int (*job_begin)(job_record_t *job_ptr);
	int (*job_ready)(job_record_t *job_ptr);
	int (*job_expand)(job_record_t *from_job_ptr,
			  job_record_t *to_job_ptr);
	int (*job_resized)(job_record_t *job_ptr, node_record_t *node_ptr);
	void (*job_mem_reduce)(job_record_t *job_ptr);
	int (*job_fini)(job_record_t *job_ptr);
	int (*job_suspend)(job_record_t *job_ptr, bool indf_susp);
	int (*job_resume)(job_record_t *job_ptr, bool indf_susp);
	int (*nodeinfo_set_all)(void);
	int (*nodeinfo_set)(job_record_t *job_ptr);
	int (*reconfigure)(void);
} gm_select_ops_26_05_t;

static const char *const cons_tres_syms[] = {
	"plugin_id",
	"select_p_node_init", "select_p_job_test",
	"select_p_job_begin", "select_p_job_ready", "select_p_job_expand",
	"select_p_job_resized", "select_p_job_mem_reduce",
	"select_p_job_fini", "select_p_job_suspend", "select_p_job_resume",
	"select_p_select_nodeinfo_set_all", "select_p_select_nodeinfo_set",
	"select_p_reconfigure",
};

static gm_select_ops_26_05_t cons_tres;

extern int init(void)
{
	size_t n = sizeof(cons_tres_syms) / sizeof(cons_tres_syms[0]);

	if (n * sizeof(void *) != sizeof(cons_tres)) {
		error("%s: symbol table does not match 26.05's select ops",
		      plugin_type);
		return SLURM_ERROR;
	}
	if (gm_load_cons_tres(cons_tres_syms, (void **) &cons_tres, n))
		return SLURM_ERROR;
	if (running_in_slurmctld())
		gm_load_settings();
	return SLURM_SUCCESS;
}

extern void fini(void)
{
	gm_free_settings();
	gm_unload_cons_tres();
}

extern int select_p_node_init(void)
{
	gm_usage_changed();
	return cons_tres.node_init();
}

/* 26.05, as 24.11, passes what the job may not use (advanced reservations) as a
 * resv_exc_t, never NULL: its exc_cores holds one core bitmap per node
 * (NULL entries and a NULL array: nothing excluded), which cons_tres
 * subtracts from the free cores. */
struct gm_call {
	job_record_t *job_ptr;
	uint32_t min_nodes, max_nodes, req_nodes;
	uint16_t mode;
	list_t **preemptee_job_list;
	resv_exc_t *resv_exc_ptr;
	will_run_data_t *will_run_ptr;
};

bool gm_shim_core_excluded(const struct gm_call *call, int node_inx, int core)
{
	bitstr_t **exc = call->resv_exc_ptr ?
		call->resv_exc_ptr->exc_cores : NULL;

	return exc && exc[node_inx] && core < bit_size(exc[node_inx]) &&
	       bit_test(exc[node_inx], core);
}

int gm_shim_cons_tres_job_test(struct gm_call *call, bitstr_t *node_bitmap,
			       bitstr_t **hidden,
			       list_t *preemptee_candidates)
{
	resv_exc_t own = { 0 }, *exc = call->resv_exc_ptr;
	bitstr_t **orig = exc ? exc->exc_cores : NULL;
	int rc, i;

	if (hidden) {
		/* The caller's exclusion, shallow, with our own core array:
		 * the caller's plus the hidden cores. */
		if (exc)
			own = *exc;
		exc = &own;
		own.exc_cores = xcalloc(node_record_count, sizeof(bitstr_t *));
		for (i = 0; i < node_record_count; i++) {
			if (orig && orig[i])
				own.exc_cores[i] = bit_copy(orig[i]);
			if (!hidden[i])
				continue;
			if (!own.exc_cores[i])
				own.exc_cores[i] = bit_copy(hidden[i]);
			else if (bit_size(own.exc_cores[i]) ==
				 bit_size(hidden[i]))
				bit_or(own.exc_cores[i], hidden[i]);
		}
	}
	rc = cons_tres.job_test(call->job_ptr, node_bitmap, call->min_nodes,
				call->max_nodes, call->req_nodes, call->mode,
				preemptee_candidates, call->preemptee_job_list,
				exc, call->will_run_ptr);
	if (exc == &own) {
		for (i = 0; i < node_record_count; i++)
			FREE_NULL_BITMAP(own.exc_cores[i]);
		xfree(own.exc_cores);
	}
	return rc;
}

extern int select_p_job_test(job_record_t *job_ptr, bitstr_t *node_bitmap,
			     uint32_t min_nodes, uint32_t max_nodes,
			     uint32_t req_nodes, uint16_t mode,
			     list_t *preemptee_candidates,
			     list_t **preemptee_job_list,
			     resv_exc_t *resv_exc_ptr,
			     will_run_data_t *will_run_ptr)
{
	struct gm_call call = {
		.job_ptr = job_ptr, .min_nodes = min_nodes,
		.max_nodes = max_nodes, .req_nodes = req_nodes, .mode = mode,
		.preemptee_job_list = preemptee_job_list,
		.resv_exc_ptr = resv_exc_ptr, .will_run_ptr = will_run_ptr,
	};

	return gm_job_test(job_ptr, node_bitmap, min_nodes, max_nodes,
			   req_nodes, mode, preemptee_candidates, &call);
}

extern int select_p_job_begin(job_record_t *job_ptr)
{
	gm_usage_changed();
	return cons_tres.job_begin(job_ptr);
}

extern int select_p_job_ready(job_record_t *job_ptr)
{
	return cons_tres.job_ready(job_ptr);
}

extern int select_p_job_expand(job_record_t *from_job_ptr,
			       job_record_t *to_job_ptr)
{
	gm_usage_changed();
	return cons_tres.job_expand(from_job_ptr, to_job_ptr);
}

extern int select_p_job_resized(job_record_t *job_ptr,
				node_record_t *node_ptr)
{
	gm_usage_changed();
	return cons_tres.job_resized(job_ptr, node_ptr);
}

/* The job's memory shrank (allocated per node): cores are unchanged. */
extern void select_p_job_mem_reduce(job_record_t *job_ptr)
{
	cons_tres.job_mem_reduce(job_ptr);
}

extern int select_p_job_fini(job_record_t *job_ptr)
{
	gm_usage_changed();
	return cons_tres.job_fini(job_ptr);
}

extern int select_p_job_suspend(job_record_t *job_ptr, bool indf_susp)
{
	gm_usage_changed();
	return cons_tres.job_suspend(job_ptr, indf_susp);
}

extern int select_p_job_resume(job_record_t *job_ptr, bool indf_susp)
{
	gm_usage_changed();
	return cons_tres.job_resume(job_ptr, indf_susp);
}

extern int select_p_select_nodeinfo_set_all(void)
{
	return cons_tres.nodeinfo_set_all();
}

/* Adds a recovered or newly started job to cons_tres's usage. */
extern int select_p_select_nodeinfo_set(job_record_t *job_ptr)
{
	gm_usage_changed();
	return cons_tres.nodeinfo_set(job_ptr);
}

extern int select_p_reconfigure(void)
{
	gm_usage_changed();
	if (running_in_slurmctld())
		gm_load_settings();
	return cons_tres.reconfigure();
}
