/*
 * select/goldminer_cons_tres on Slurm 25.11 and 26.05: what only these
 * releases have. Since 25.05 the select interface is 12 select_p_* and
 * plugin_id, as src/interfaces/select.c lists them (node and job info,
 * state save and steps left the interface): ops_common.c's table without
 * its 22.05 and 24.11 part. 26.05 added job_mem_reduce, here behind a
 * version guard. job_test's arguments are 24.11's.
 *
 * From 25.05 on slurmctld loads only SelectType and treats the cluster as
 * cons_tres (GPU requests, CR_Core, CoreCnt reservations) only when the
 * loaded plugin's plugin_id is cons_tres's own (running_cons_tres()): this
 * wrapper reports cons_tres's id, 109. init returns int, fini nothing.
 */
/* First: it renames the libslurm functions the headers below declare. */
#include "config.h"
#include "src/common/slurm_xlator.h"

#include "select_plugin/shim.h"

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
#define GM_OPS_MEM_REDUCE 1
#endif

/* cons_tres's own id: these releases enable cons_tres features by it. */
const uint32_t plugin_id = SELECT_PLUGIN_CONS_TRES;

#ifdef GM_OPS_MEM_REDUCE
/* cons_tres's entry points that only 26.05 has, resolved by the names
 * below, in the same order. */
static struct {
	void (*job_mem_reduce)(job_record_t *job_ptr);
} cons_tres;

static const char *const cons_tres_syms[] = {
	"select_p_job_mem_reduce",
};

GM_SYMS_MATCH(cons_tres_syms, cons_tres);
#endif

extern int init(void)
{
#ifdef GM_OPS_MEM_REDUCE
	const struct gm_syms own = GM_SYMS(cons_tres_syms, cons_tres);

	return gm_ops_init(&own);
#else
	return gm_ops_init(NULL);
#endif
}

extern void fini(void)
{
	gm_ops_fini();
}

#ifdef GM_OPS_MEM_REDUCE
/* The job's memory shrank (allocated per node): cores are unchanged. */
extern void select_p_job_mem_reduce(job_record_t *job_ptr)
{
	cons_tres.job_mem_reduce(job_ptr);
}
#endif
