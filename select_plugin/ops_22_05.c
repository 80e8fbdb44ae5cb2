/*
 * select/goldminer_cons_tres on Slurm 22.05: what only this release has.
 * Its select interface (35 select_p_* and plugin_id, as
 * src/common/select.c lists them) is ops_common.c's table for 22.05 and
 * 24.11 plus, here, job_test with 22.05's exclusion argument (a core
 * bitmap, behind struct gm_call), job_signal, jobinfo_sprint and
 * jobinfo_xstrdup, update_node_config and resv_test.
 */
/* First: it renames the libslurm functions the headers below declare. */
#include "config.h"
#include "src/common/slurm_xlator.h"

#include "select_plugin/shim.h"
#include "src/common/node_conf.h"

/* Unique among select plugins (cons_tres is 109); >= 100 as Slurm requires. */
const uint32_t plugin_id = 190;

/* cons_tres's entry points that only 22.05 has (or has with these
 * arguments), as slurm_select_ops_t declares them, resolved by the names
 * below, in the same order. */
static struct {
	int (*job_test)(job_record_t *job_ptr, bitstr_t *bitmap,
			uint32_t min_nodes, uint32_t max_nodes,
			uint32_t req_nodes, uint16_t mode,
			List preemptee_candidates,
			List *preemptee_job_list,
			bitstr_t *exc_core_bitmap);
	int (*job_signal)(job_record_t *job_ptr, int signal);
	char *(*jobinfo_sprint)(select_jobinfo_t *jobinfo, char *buf,
				size_t size, int mode);
	char *(*jobinfo_xstrdup)(select_jobinfo_t *jobinfo, int mode);
	int (*update_node_config)(int index);
	bitstr_t *(*resv_test)(resv_desc_msg_t *resv_desc_ptr,
			       uint32_t node_cnt, bitstr_t *avail_bitmap,
			       bitstr_t **core_bitmap);
} cons_tres;

static const char *const cons_tres_syms[] = {
	"select_p_job_test", "select_p_job_signal",
	"select_p_select_jobinfo_sprint", "select_p_select_jobinfo_xstrdup",
	"select_p_update_node_config", "select_p_resv_test",
};

GM_SYMS_MATCH(cons_tres_syms, cons_tres);

extern int init(void)
{
	const struct gm_syms own = GM_SYMS(cons_tres_syms, cons_tres);

	return gm_ops_init(&own);
}

extern int fini(void)
{
	gm_ops_fini();
	return SLURM_SUCCESS;
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

extern int select_p_job_signal(job_record_t *job_ptr, int signal)
{
	return cons_tres.job_signal(job_ptr, signal);
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

extern int select_p_update_node_config(int index)
{
	gm_usage_changed();
	return cons_tres.update_node_config(index);
}

extern bitstr_t *select_p_resv_test(resv_desc_msg_t *resv_desc_ptr,
				    uint32_t node_cnt,
				    bitstr_t *avail_bitmap,
				    bitstr_t **core_bitmap)
{
	return cons_tres.resv_test(resv_desc_ptr, node_cnt, avail_bitmap,
				   core_bitmap);
}
