/*
 * select/goldminer_cons_tres's select_p_* entry points that the supported
 * releases share (configure accepts 22.05, 24.11, 25.11 and 26.05): every one but
 * job_test delegates to cons_tres (loaded by cons_tres.c); those that
 * change allocations tell the job_test view (gm_usage_changed); job_test
 * goes through the release-independent gm_job_test (narrowing.c) with the
 * release's arguments behind struct gm_call. The file of each release
 * (ops_RELEASE.c) keeps only what differs: plugin_id, init and fini, and
 * the entry points only that release has.
 *
 * Where the releases part, a version guard says which have what:
 *  - before 25.05 (22.05, 24.11): state save and restore, job_init, the
 *    step calls, node and job info (GM_OPS_INFO);
 *  - from 24.11 on (not 22.05): job_test's exclusion argument is a
 *    resv_exc_t, plus will_run data (GM_OPS_RESV_EXC); 22.05's job_test is
 *    in ops_22_05.c;
 *  - from 25.05 on: recovered jobs reach cons_tres through nodeinfo_set
 *    (job_init left the interface), so it changes the job_test view.
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

#if SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(25, 5, 0)
#define GM_OPS_INFO 1
#endif
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 11, 0)
#define GM_OPS_RESV_EXC 1
#endif

const char plugin_name[] = "GoldMiner select plugin (wraps cons_tres)";
const char plugin_type[] = "select/goldminer_cons_tres";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

/* cons_tres's shared entry points, in the order of the releases' ops
 * tables (src/interfaces/select.c; src/common/select.c before 23.02),
 * resolved by the names below, in the same order. */
static struct {
	uint32_t *plugin_id;
#ifdef GM_OPS_INFO
	int (*state_save)(char *dir_name);
	int (*state_restore)(char *dir_name);
	int (*job_init)(list_t *job_list);
#endif
	int (*node_init)(void);
#ifdef GM_OPS_RESV_EXC
	int (*job_test)(job_record_t *job_ptr, bitstr_t *bitmap,
			uint32_t min_nodes, uint32_t max_nodes,
			uint32_t req_nodes, uint16_t mode,
			list_t *preemptee_candidates,
			list_t **preemptee_job_list,
			resv_exc_t *resv_exc_ptr,
			will_run_data_t *will_run_ptr);
#endif
	int (*job_begin)(job_record_t *job_ptr);
	int (*job_ready)(job_record_t *job_ptr);
	int (*job_expand)(job_record_t *from_job_ptr,
			  job_record_t *to_job_ptr);
	int (*job_resized)(job_record_t *job_ptr, node_record_t *node_ptr);
	int (*job_fini)(job_record_t *job_ptr);
	int (*job_suspend)(job_record_t *job_ptr, bool indf_susp);
	int (*job_resume)(job_record_t *job_ptr, bool indf_susp);
#ifdef GM_OPS_INFO
	bitstr_t *(*step_pick_nodes)(job_record_t *job_ptr,
				     select_jobinfo_t *step_jobinfo,
				     uint32_t node_count,
				     bitstr_t **avail_nodes);
	int (*step_start)(step_record_t *step_ptr);
	int (*step_finish)(step_record_t *step_ptr, bool killing_step);
	int (*nodeinfo_pack)(select_nodeinfo_t *nodeinfo, buf_t *buffer,
			     uint16_t protocol_version);
	int (*nodeinfo_unpack)(select_nodeinfo_t **nodeinfo, buf_t *buffer,
			       uint16_t protocol_version);
	select_nodeinfo_t *(*nodeinfo_alloc)(void);
	int (*nodeinfo_free)(select_nodeinfo_t *nodeinfo);
#endif
	int (*nodeinfo_set_all)(void);
	int (*nodeinfo_set)(job_record_t *job_ptr);
#ifdef GM_OPS_INFO
	int (*nodeinfo_get)(select_nodeinfo_t *nodeinfo,
			    enum select_nodedata_type dinfo,
			    enum node_states state, void *data);
	select_jobinfo_t *(*jobinfo_alloc)(void);
	int (*jobinfo_free)(select_jobinfo_t *jobinfo);
	int (*jobinfo_set)(select_jobinfo_t *jobinfo,
			   enum select_jobdata_type data_type, void *data);
	int (*jobinfo_get)(select_jobinfo_t *jobinfo,
			   enum select_jobdata_type data_type, void *data);
	select_jobinfo_t *(*jobinfo_copy)(select_jobinfo_t *jobinfo);
	int (*jobinfo_pack)(select_jobinfo_t *jobinfo, buf_t *buffer,
			    uint16_t protocol_version);
	int (*jobinfo_unpack)(select_jobinfo_t **jobinfo_pptr, buf_t *buffer,
			      uint16_t protocol_version);
	int (*get_info_from_plugin)(enum select_plugindata_info dinfo,
				    job_record_t *job_ptr, void *data);
#endif
	int (*reconfigure)(void);
} cons_tres;

static const char *const cons_tres_syms[] = {
	"plugin_id",
#ifdef GM_OPS_INFO
	"select_p_state_save", "select_p_state_restore",
	"select_p_job_init",
#endif
	"select_p_node_init",
#ifdef GM_OPS_RESV_EXC
	"select_p_job_test",
#endif
	"select_p_job_begin", "select_p_job_ready", "select_p_job_expand",
	"select_p_job_resized", "select_p_job_fini",
	"select_p_job_suspend", "select_p_job_resume",
#ifdef GM_OPS_INFO
	"select_p_step_pick_nodes", "select_p_step_start",
	"select_p_step_finish",
	"select_p_select_nodeinfo_pack", "select_p_select_nodeinfo_unpack",
	"select_p_select_nodeinfo_alloc", "select_p_select_nodeinfo_free",
#endif
	"select_p_select_nodeinfo_set_all", "select_p_select_nodeinfo_set",
#ifdef GM_OPS_INFO
	"select_p_select_nodeinfo_get",
	"select_p_select_jobinfo_alloc", "select_p_select_jobinfo_free",
	"select_p_select_jobinfo_set", "select_p_select_jobinfo_get",
	"select_p_select_jobinfo_copy", "select_p_select_jobinfo_pack",
	"select_p_select_jobinfo_unpack",
	"select_p_get_info_from_plugin",
#endif
	"select_p_reconfigure",
};

GM_SYMS_MATCH(cons_tres_syms, cons_tres);

int gm_ops_init(const struct gm_syms *release)
{
	const struct gm_syms tables[] = {
		GM_SYMS(cons_tres_syms, cons_tres),
		release ? *release : (struct gm_syms) { 0 },
	};

	if (gm_load_cons_tres(tables, release ? 2 : 1))
		return SLURM_ERROR;
	/* Clients (sinfo, scontrol, slurmd) load select plugins too. */
	if (running_in_slurmctld())
		gm_load_settings();
	return SLURM_SUCCESS;
}

void gm_ops_fini(void)
{
	gm_free_settings();
	gm_unload_cons_tres();
}

#ifdef GM_OPS_INFO
extern int select_p_state_save(char *dir_name)
{
	return cons_tres.state_save(dir_name);
}

extern int select_p_state_restore(char *dir_name)
{
	gm_usage_changed();
	return cons_tres.state_restore(dir_name);
}

extern int select_p_job_init(list_t *job_list)
{
	gm_usage_changed();
	return cons_tres.job_init(job_list);
}
#endif

extern int select_p_node_init(void)
{
	gm_usage_changed();
	return cons_tres.node_init();
}

#ifdef GM_OPS_RESV_EXC
/* From 24.11 on, callers pass what the job may not use (advanced reservations)
 * as a resv_exc_t, never NULL: its exc_cores holds one core bitmap per
 * node (NULL entries and a NULL array: nothing excluded), which cons_tres
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
#endif

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

#ifdef GM_OPS_INFO
extern bitstr_t *select_p_step_pick_nodes(job_record_t *job_ptr,
					  select_jobinfo_t *jobinfo,
					  uint32_t node_count,
					  bitstr_t **avail_nodes)
{
	return cons_tres.step_pick_nodes(job_ptr, jobinfo, node_count,
					 avail_nodes);
}

extern int select_p_step_start(step_record_t *step_ptr)
{
	return cons_tres.step_start(step_ptr);
}

extern int select_p_step_finish(step_record_t *step_ptr, bool killing_step)
{
	return cons_tres.step_finish(step_ptr, killing_step);
}

extern int select_p_select_nodeinfo_pack(select_nodeinfo_t *nodeinfo,
					 buf_t *buffer,
					 uint16_t protocol_version)
{
	return cons_tres.nodeinfo_pack(nodeinfo, buffer, protocol_version);
}

extern int select_p_select_nodeinfo_unpack(select_nodeinfo_t **nodeinfo,
					   buf_t *buffer,
					   uint16_t protocol_version)
{
	return cons_tres.nodeinfo_unpack(nodeinfo, buffer, protocol_version);
}

extern select_nodeinfo_t *select_p_select_nodeinfo_alloc(void)
{
	return cons_tres.nodeinfo_alloc();
}

extern int select_p_select_nodeinfo_free(select_nodeinfo_t *nodeinfo)
{
	return cons_tres.nodeinfo_free(nodeinfo);
}
#endif

extern int select_p_select_nodeinfo_set_all(void)
{
	return cons_tres.nodeinfo_set_all();
}

extern int select_p_select_nodeinfo_set(job_record_t *job_ptr)
{
#ifndef GM_OPS_INFO
	/* A recovered or newly started job joins cons_tres's usage here. */
	gm_usage_changed();
#endif
	return cons_tres.nodeinfo_set(job_ptr);
}

#ifdef GM_OPS_INFO
extern int select_p_select_nodeinfo_get(select_nodeinfo_t *nodeinfo,
					enum select_nodedata_type dinfo,
					enum node_states state, void *data)
{
	return cons_tres.nodeinfo_get(nodeinfo, dinfo, state, data);
}

extern select_jobinfo_t *select_p_select_jobinfo_alloc(void)
{
	return cons_tres.jobinfo_alloc();
}

extern int select_p_select_jobinfo_free(select_jobinfo_t *jobinfo)
{
	return cons_tres.jobinfo_free(jobinfo);
}

extern int select_p_select_jobinfo_set(select_jobinfo_t *jobinfo,
				       enum select_jobdata_type data_type,
				       void *data)
{
	return cons_tres.jobinfo_set(jobinfo, data_type, data);
}

extern int select_p_select_jobinfo_get(select_jobinfo_t *jobinfo,
				       enum select_jobdata_type data_type,
				       void *data)
{
	return cons_tres.jobinfo_get(jobinfo, data_type, data);
}

extern select_jobinfo_t *select_p_select_jobinfo_copy(
	select_jobinfo_t *jobinfo)
{
	return cons_tres.jobinfo_copy(jobinfo);
}

extern int select_p_select_jobinfo_pack(select_jobinfo_t *jobinfo,
					buf_t *buffer,
					uint16_t protocol_version)
{
	return cons_tres.jobinfo_pack(jobinfo, buffer, protocol_version);
}

extern int select_p_select_jobinfo_unpack(select_jobinfo_t **jobinfo_pptr,
					  buf_t *buffer,
					  uint16_t protocol_version)
{
	return cons_tres.jobinfo_unpack(jobinfo_pptr, buffer,
					protocol_version);
}

extern int select_p_get_info_from_plugin(enum select_plugindata_info dinfo,
					 job_record_t *job_ptr, void *data)
{
	return cons_tres.get_info_from_plugin(dinfo, job_ptr, data);
}
#endif

extern int select_p_reconfigure(void)
{
	gm_usage_changed();
	if (running_in_slurmctld())
		gm_load_settings();
	return cons_tres.reconfigure();
}
