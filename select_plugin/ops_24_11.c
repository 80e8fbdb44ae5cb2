/*
 * select/goldminer_cons_tres on Slurm 24.11: what only this release has.
 * Its select interface (31 select_p_* and plugin_id, as
 * src/interfaces/select.c lists them) is ops_common.c's whole table:
 * node and job info, state save and the step calls as on 22.05, job_test
 * with a resv_exc_t as from 25.11 on.
 *
 * 24.11's slurmctld loads every select_*.so in PluginDir and refuses a
 * duplicate plugin_id: this plugin keeps an id of its own, as on 22.05.
 */
/* First: it renames the libslurm functions the headers below declare. */
#include "config.h"
#include "src/common/slurm_xlator.h"

#include "select_plugin/shim.h"

/* Unique among select plugins (cons_tres is 109); >= 100 as Slurm requires. */
const uint32_t plugin_id = 190;

extern int init(void)
{
	return gm_ops_init(NULL);
}

extern int fini(void)
{
	gm_ops_fini();
	return SLURM_SUCCESS;
}
