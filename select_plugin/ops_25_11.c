/*
 * select/goldminer_cons_tres on Slurm 26.05: what only this release has.
 * Its select interface is 13 select_p_* and plugin_id, as
 * src/interfaces/select.c lists them (node and job info, state save and
 * steps left the interface): ops_common.c's table without its 22.05 and
 * 24.11 part, plus job_mem_reduce here. job_test's arguments are 24.11's.
 *
 * 26.05's slurmctld loads only SelectType and treats the cluster as
 * cons_tres (GPU requests, CR_Core, CoreCnt reservations) only when the
 * loaded plugin's plugin_id is cons_tres's own (running_cons_tres()): this
 * wrapper reports cons_tres's id, 109. init returns int, fini nothing.
 */
/* First: it renames the libslurm functions the headers below declare. */
#include "config.h"
#include "src/common/slurm_xlator.h"

#include "select_plugin/shim.h"

/* cons_tres's own id: 26.05 enables its cons_tres features by the id. */
const uint32_t plugin_id = SELECT_PLUGIN_CONS_TRES;

/* cons_tres's entry points that only 26.05 has, resolved by the names
 * below, in the same order. */
static struct {
	void (*job_mem_reduce)(job_record_t *job_ptr);
} cons_tres;

static const char *const cons_tres_syms[] = {
	"select_p_job_mem_reduce",
};

GM_SYMS_MATCH(cons_tres_syms, cons_tres);

extern int init(void)
{
	const struct gm_syms own = GM_SYMS(cons_tres_syms, cons_tres);

	return gm_ops_init(&own);
}

extern void fini(void)
{
	gm_ops_fini();
}

/* The job's memory shrank (allocated per node): cores are unchanged. */
extern void select_p_job_mem_reduce(job_record_t *job_ptr)
{
	cons_tres.job_mem_reduce(job_ptr);
}
