/*
 * select/goldminer_cons_tres: the select plugin slurmctld loads as
 * SelectType=select/goldminer_cons_tres. For now it delegates every call to
 * Slurm's own select/cons_tres (dlopen'ed from PluginDir) and, with
 * DebugFlags=SelectType, logs each job_test decision. GoldMiner's placement
 * policy (CPU reserve per GPU, data workers on stranded CPUs) will hook into
 * select_p_job_test here, with the policy itself in the Slurm-free core.
 *
 * Written in C: Slurm's internal headers do not compile as C++. Every
 * function only converts Slurm values, calls cons_tres or the core, and maps
 * the result back (STYLE.md §1-2). If cons_tres cannot be loaded, init fails
 * and slurmctld reports it; no call ever reaches a missing function.
 */
#include "config.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "src/common/slurm_xlator.h"
#include "src/common/bitstring.h"
#include "src/common/node_conf.h"
#include "src/common/select.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/slurmctld/slurmctld.h"

#include "gmcore/select_decision.h"

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
static void *cons_tres_handle;
static int (*cons_tres_fini)(void);

/* Finds select_cons_tres.so in PluginDir (a colon list). */
static int _find_cons_tres(char *path, size_t len)
{
	char *dirs = xstrdup(slurm_conf.plugindir), *save = NULL, *dir;
	int found = 0;

	for (dir = strtok_r(dirs, ":", &save); dir && !found;
	     dir = strtok_r(NULL, ":", &save)) {
		snprintf(path, len, "%s/select_cons_tres.so", dir);
		found = (access(path, R_OK) == 0);
	}
	xfree(dirs);
	return found;
}

extern int init(void)
{
	char path[PATH_MAX];
	void **slots = (void **) &cons_tres;
	int (*cons_tres_init)(void);
	bool already_loaded;
	size_t i, n = sizeof(cons_tres_syms) / sizeof(cons_tres_syms[0]);

	if (n * sizeof(void *) != sizeof(cons_tres)) {
		error("%s: symbol table does not match slurm_select_ops_t",
		      plugin_type);
		return SLURM_ERROR;
	}
	if (!_find_cons_tres(path, sizeof(path))) {
		error("%s: select_cons_tres.so not found in PluginDir %s",
		      plugin_type, slurm_conf.plugindir);
		return SLURM_ERROR;
	}
	/* If Slurm's plugrack loaded it already, it also ran its init. */
	already_loaded = dlopen(path, RTLD_LAZY | RTLD_NOLOAD) != NULL;
	if (already_loaded)
		dlclose(dlopen(path, RTLD_LAZY | RTLD_NOLOAD));
	cons_tres_handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (!cons_tres_handle) {
		error("%s: dlopen %s: %s", plugin_type, path, dlerror());
		return SLURM_ERROR;
	}
	for (i = 0; i < n; i++) {
		slots[i] = dlsym(cons_tres_handle, cons_tres_syms[i]);
		if (!slots[i]) {
			error("%s: %s lacks %s", plugin_type, path,
			      cons_tres_syms[i]);
			dlclose(cons_tres_handle);
			cons_tres_handle = NULL;
			return SLURM_ERROR;
		}
	}
	if (!already_loaded) {
		cons_tres_init = dlsym(cons_tres_handle, "init");
		cons_tres_fini = dlsym(cons_tres_handle, "fini");
		if (cons_tres_init && cons_tres_init() != SLURM_SUCCESS) {
			error("%s: init of %s failed", plugin_type, path);
			dlclose(cons_tres_handle);
			cons_tres_handle = NULL;
			return SLURM_ERROR;
		}
	}
	/* Clients (sinfo, scontrol) load select plugins too: stay quiet. */
	verbose("%s loaded, delegating to %s", plugin_type, path);
	return SLURM_SUCCESS;
}

extern int fini(void)
{
	if (cons_tres_fini)
		cons_tres_fini();
	cons_tres_fini = NULL;
	if (cons_tres_handle)
		dlclose(cons_tres_handle);
	cons_tres_handle = NULL;
	return SLURM_SUCCESS;
}

extern int select_p_state_save(char *dir_name)
{
	return cons_tres.state_save(dir_name);
}

extern int select_p_state_restore(char *dir_name)
{
	return cons_tres.state_restore(dir_name);
}

extern int select_p_job_init(List job_list)
{
	return cons_tres.job_init(job_list);
}

extern int select_p_node_init(void)
{
	return cons_tres.node_init();
}

/* Logs one decision when DebugFlags=SelectType is set. */
static void _log_job_test(job_record_t *job_ptr, bitstr_t *node_bitmap,
			  uint32_t min_nodes, uint32_t max_nodes,
			  uint32_t req_nodes, uint16_t mode, int candidates,
			  int rc)
{
	struct gm_job_test_record record = { 0 };
	char line[1024];
	char *selected = NULL;

	record.job_id = job_ptr->job_id;
	record.het_job_id = job_ptr->het_job_id;
	record.het_job_offset = job_ptr->het_job_offset;
	record.mode = mode & SELECT_MODE_BASE;	/* without the flag bits */
	record.min_nodes = min_nodes;
	record.max_nodes = max_nodes;
	record.req_nodes = req_nodes;
	record.candidate_nodes = candidates;
	record.rc = rc;
	if (rc == SLURM_SUCCESS)
		selected = bitmap2node_name(node_bitmap);
	record.selected = selected;
	record.gres = job_ptr->tres_per_node;
	gm_format_job_test(&record, line, sizeof(line));
	info("%s: %s", plugin_type, line);
	xfree(selected);
}

extern int select_p_job_test(job_record_t *job_ptr, bitstr_t *node_bitmap,
			     uint32_t min_nodes, uint32_t max_nodes,
			     uint32_t req_nodes, uint16_t mode,
			     List preemptee_candidates,
			     List *preemptee_job_list,
			     bitstr_t *exc_core_bitmap)
{
	bool trace = slurm_conf.debug_flags & DEBUG_FLAG_SELECT_TYPE;
	int candidates = trace ? bit_set_count(node_bitmap) : 0;
	int rc = cons_tres.job_test(job_ptr, node_bitmap, min_nodes,
				    max_nodes, req_nodes, mode,
				    preemptee_candidates, preemptee_job_list,
				    exc_core_bitmap);

	if (trace)
		_log_job_test(job_ptr, node_bitmap, min_nodes, max_nodes,
			      req_nodes, mode, candidates, rc);
	return rc;
}

extern int select_p_job_begin(job_record_t *job_ptr)
{
	return cons_tres.job_begin(job_ptr);
}

extern int select_p_job_ready(job_record_t *job_ptr)
{
	return cons_tres.job_ready(job_ptr);
}

extern int select_p_job_expand(job_record_t *from_job_ptr,
			       job_record_t *to_job_ptr)
{
	return cons_tres.job_expand(from_job_ptr, to_job_ptr);
}

extern int select_p_job_resized(job_record_t *job_ptr,
				node_record_t *node_ptr)
{
	return cons_tres.job_resized(job_ptr, node_ptr);
}

extern int select_p_job_signal(job_record_t *job_ptr, int signal)
{
	return cons_tres.job_signal(job_ptr, signal);
}

extern int select_p_job_fini(job_record_t *job_ptr)
{
	return cons_tres.job_fini(job_ptr);
}

extern int select_p_job_suspend(job_record_t *job_ptr, bool indf_susp)
{
	return cons_tres.job_suspend(job_ptr, indf_susp);
}

extern int select_p_job_resume(job_record_t *job_ptr, bool indf_susp)
{
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
	return cons_tres.update_node_config(index);
}

extern int select_p_reconfigure(void)
{
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
