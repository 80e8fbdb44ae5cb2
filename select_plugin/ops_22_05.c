/*
 * select/goldminer_cons_tres on Slurm 22.05: the release's select ops
 * table. Every select_p_* but job_test delegates to cons_tres (loaded by
 * cons_tres.c); those that change allocations tell the job_test view
 * (gm_usage_changed); job_test goes through the release-independent
 * gm_job_test (goldminer_job_test.c) with 22.05's arguments behind
 * struct gm_call (shim.h says how to add a release).
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
#include "src/common/select.h"

const char plugin_name[] = "GoldMiner select plugin (wraps cons_tres)";
const char plugin_type[] = "select/goldminer_cons_tres";
/* Unique among select plugins (cons_tres is 109); >= 100 as Slurm requires. */
const uint32_t plugin_id = 190;
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

/* Symbol names in slurm_select_ops_t order (as src/common/select.c lists). */
static const char *const cons_tres_syms[] = {
	"plugin_id",
	"select_p_state_save", "select_p_state_restore",
	"select_p_job_init", "select_p_node_init", "select_p_job_test",
	"select_p_job_begin", "select_p_job_ready", "select_p_job_expand",
	"select_p_job_resized", "select_p_job_signal", "select_p_job_fini",
	"select_p_job_suspend", "select_p_job_resume",
	"select_p_step_pick_nodes", "select_p_step_start",
	"select_p_step_finish",
	"select_p_select_nodeinfo_pack", "select_p_select_nodeinfo_unpack",
	"select_p_select_nodeinfo_alloc", "select_p_select_nodeinfo_free",
	"select_p_select_nodeinfo_set_all", "select_p_select_nodeinfo_set",
	"select_p_select_nodeinfo_get",
	"select_p_select_jobinfo_alloc", "select_p_select_jobinfo_free",
	"select_p_select_jobinfo_set", "select_p_select_jobinfo_get",
	"select_p_select_jobinfo_copy", "select_p_select_jobinfo_pack",
	"select_p_select_jobinfo_unpack", "select_p_select_jobinfo_sprint",
	"select_p_select_jobinfo_xstrdup",
	"select_p_get_info_from_plugin", "select_p_update_node_config",
	"select_p_reconfigure", "select_p_resv_test",
};

static slurm_select_ops_t cons_tres;

extern int init(void)
{
	size_t n = sizeof(cons_tres_syms) / sizeof(cons_tres_syms[0]);

	if (n * sizeof(void *) != sizeof(cons_tres)) {
		error("%s: symbol table does not match slurm_select_ops_t",
		      plugin_type);
		return SLURM_ERROR;
	}
	if (gm_load_cons_tres(cons_tres_syms, (void **) &cons_tres, n))
		return SLURM_ERROR;
	/* Clients (sinfo, scontrol, slurmd) load select plugins too. */
	if (running_in_slurmctld())
		gm_load_settings();
	return SLURM_SUCCESS;
}

extern int fini(void)
{
	gm_free_settings();
	gm_unload_cons_tres();
	return SLURM_SUCCESS;
}

extern int select_p_state_save(char *dir_name)
{
	return cons_tres.state_save(dir_name);
}

extern int select_p_state_restore(char *dir_name)
{
	gm_usage_changed();
	return cons_tres.state_restore(dir_name);
}

extern int select_p_job_init(List job_list)
{
	gm_usage_changed();
	return cons_tres.job_init(job_list);
}

extern int select_p_node_init(void)
{
	gm_usage_changed();
	return cons_tres.node_init();
}

/* 22.05 passes the cores to exclude (advanced reservations) as one
 * bitmap over every core of the cluster (cr_get_coremap_offset). */
struct gm_call {
	job_record_t *job_ptr;
	uint32_t min_nodes, max_nodes, req_nodes;
	uint16_t mode;
	List *preemptee_job_list;
	bitstr_t *exc_core_bitmap;
};

bool gm_shim_core_excluded(const struct gm_call *call, int node_inx, int core)
{
	return call->exc_core_bitmap &&
	       bit_test(call->exc_core_bitmap,
			cr_get_coremap_offset(node_inx) + core);
}

int gm_shim_cons_tres_job_test(struct gm_call *call, bitstr_t *node_bitmap,
			       bitstr_t **hidden,
			       list_t *preemptee_candidates)
{
	bitstr_t *exc = call->exc_core_bitmap;
	int rc, i, c;

	if (hidden) {
		exc = call->exc_core_bitmap ?
			bit_copy(call->exc_core_bitmap) :
			bit_alloc(cr_get_coremap_offset(node_record_count));
		for (i = 0; i < node_record_count; i++) {
			uint32_t offset;

			if (!hidden[i])
				continue;
			offset = cr_get_coremap_offset(i);
			for (c = bit_ffs(hidden[i]); c >= 0 &&
			     c < bit_size(hidden[i]); c++)
				if (bit_test(hidden[i], c))
					bit_set(exc, offset + c);
		}
	}
	rc = cons_tres.job_test(call->job_ptr, node_bitmap, call->min_nodes,
				call->max_nodes, call->req_nodes, call->mode,
				preemptee_candidates, call->preemptee_job_list,
				exc);
	if (exc != call->exc_core_bitmap)
		FREE_NULL_BITMAP(exc);
	return rc;
}

extern int select_p_job_test(job_record_t *job_ptr, bitstr_t *node_bitmap,
			     uint32_t min_nodes, uint32_t max_nodes,
			     uint32_t req_nodes, uint16_t mode,
			     List preemptee_candidates,
			     List *preemptee_job_list,
			     bitstr_t *exc_core_bitmap)
{
	struct gm_call call = {
		.job_ptr = job_ptr, .min_nodes = min_nodes,
		.max_nodes = max_nodes, .req_nodes = req_nodes, .mode = mode,
		.preemptee_job_list = preemptee_job_list,
		.exc_core_bitmap = exc_core_bitmap,
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

extern int select_p_job_signal(job_record_t *job_ptr, int signal)
{
	return cons_tres.job_signal(job_ptr, signal);
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

extern int select_p_select_nodeinfo_set_all(void)
{
	return cons_tres.nodeinfo_set_all();
}

extern int select_p_select_nodeinfo_set(job_record_t *job_ptr)
{
	return cons_tres.nodeinfo_set(job_ptr);
}

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

extern char *select_p_select_jobinfo_sprint(select_jobinfo_t *jobinfo,
					    char *buf, size_t size, int mode)
{
	return cons_tres.jobinfo_sprint(jobinfo, buf, size, mode);
}

extern char *select_p_select_jobinfo_xstrdup(select_jobinfo_t *jobinfo,
					     int mode)
{
	return cons_tres.jobinfo_xstrdup(jobinfo, mode);
}

extern int select_p_get_info_from_plugin(enum select_plugindata_info dinfo,
					 job_record_t *job_ptr, void *data)
{
	return cons_tres.get_info_from_plugin(dinfo, job_ptr, data);
}

extern int select_p_update_node_config(int index)
{
	gm_usage_changed();
	return cons_tres.update_node_config(index);
}

extern int select_p_reconfigure(void)
{
	gm_usage_changed();
	if (running_in_slurmctld())
		gm_load_settings();
	return cons_tres.reconfigure();
}

extern bitstr_t *select_p_resv_test(resv_desc_msg_t *resv_desc_ptr,
				    uint32_t node_cnt,
				    bitstr_t *avail_bitmap,
				    bitstr_t **core_bitmap)
{
	return cons_tres.resv_test(resv_desc_ptr, node_cnt, avail_bitmap,
				   core_bitmap);
}
