/*
 * select/goldminer_cons_tres's narrowing of cons_tres's choice: its
 * job_test, independent of the Slurm release: turns slurmctld's node table
 * and job records into plain values, asks the scheduler core what to
 * change (sched/select_decision.h: the CPU reserve next to free GPUs, data
 * workers on stranded CPUs first), narrows the candidate nodes and cores
 * accordingly and lets cons_tres choose within them (through the
 * release's shim). It never re-implements cons_tres.
 *
 * Any failure of ours (an internal error in the core, a bad goldminer.conf)
 * gives cons_tres's own decision and one log line: a bug here must never
 * make slurmctld refuse or lose a job. Called with slurmctld's job and node
 * write locks held, from one thread at a time.
 */
#include "select_plugin/shim.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "src/common/job_resources.h"
#include "src/common/node_conf.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
#include "src/interfaces/gres.h"
#else
#include "src/common/gres.h"
#endif

#include "sched/select_decision.h"

/* slurmd and the clients load select plugins too, and have no job list:
 * this definition lets the plugin load there. In slurmctld its own
 * job_list takes its place (the map exports it, so it interposes), as
 * cons_tres does. */
list_t *job_list;

static struct gm_select_config *settings; /* NULL: plain cons_tres */

/* Cores of running and suspended jobs, one bit per core of the cluster
 * (cr_get_coremap_offset), rebuilt when an allocation changed. */
static bitstr_t *alloc_cores;
static bool usage_dirty = true;
static int usage_node_count = -1;

void gm_usage_changed(void)
{
	usage_dirty = true;
}

void gm_load_settings(void)
{
	char err[1024], text[256];
	struct gm_select_config *loaded;

	loaded = gm_select_config_load(slurm_conf.slurm_conf, err,
				       sizeof(err));
	gm_free_settings();
	settings = loaded;
	if (!loaded) {
		error("%s: %s; running as plain cons_tres until it is fixed (scontrol reconfigure)",
		      plugin_type, err);
		return;
	}
	gm_select_config_describe(loaded, text, sizeof(text));
	verbose("%s: %s", plugin_type, text);
}

void gm_free_settings(void)
{
	gm_select_config_free(settings);
	settings = NULL;
	FREE_NULL_BITMAP(alloc_cores);
	usage_dirty = true;
}

static double _now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void _rebuild_usage(void)
{
	list_itr_t *it;
	job_record_t *job;

	FREE_NULL_BITMAP(alloc_cores);
	alloc_cores = bit_alloc(cr_get_coremap_offset(node_record_count));
	it = list_iterator_create(job_list);
	while ((job = list_next(it))) {
		if (!(IS_JOB_RUNNING(job) || IS_JOB_SUSPENDED(job)) ||
		    !job->job_resrcs)
			continue;
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 11, 0)
		add_job_to_cores(job->job_resrcs, &alloc_cores);
#else
		add_job_to_cores(job->job_resrcs, &alloc_cores,
				 cr_node_num_cores);
#endif
	}
	list_iterator_destroy(it);
	usage_dirty = false;
	usage_node_count = node_record_count;
}

/* The node's GPUs (all types) as slurmctld counts them allocated. */
static void _node_gpus(node_record_t *node, uint32_t *total, uint32_t *free)
{
	list_itr_t *it;
	gres_state_t *gs;
	uint64_t avail = 0, alloc = 0;

	*total = *free = 0;
	if (!node->gres_list)
		return;
	it = list_iterator_create(node->gres_list);
	while ((gs = list_next(it))) {
		gres_node_state_t *ns = gs->gres_data;

		if (!ns || xstrcmp(gs->gres_name, "gpu"))
			continue;
		avail += ns->gres_cnt_avail;
		alloc += ns->gres_cnt_alloc;
	}
	list_iterator_destroy(it);
	*total = avail;
	*free = alloc < avail ? avail - alloc : 0;
}

static bool _asks_gpu(job_record_t *job)
{
	return gm_tres_requests_gpu(job->tres_per_job) ||
	       gm_tres_requests_gpu(job->tres_per_node) ||
	       gm_tres_requests_gpu(job->tres_per_socket) ||
	       gm_tres_requests_gpu(job->tres_per_task);
}

/* CPUs held by trainer `trainer_id`'s running companion jobs but `self`. */
static uint32_t _worker_cpus_held(job_record_t *self, uint32_t trainer_id)
{
	list_itr_t *it = list_iterator_create(job_list);
	job_record_t *job;
	uint32_t held = 0;

	while ((job = list_next(it))) {
		if (job == self || job->user_id != self->user_id ||
		    !IS_JOB_RUNNING(job) ||
		    gm_companion_trainer_id(job->name) != trainer_id)
			continue;
		held += job->total_cpus;
	}
	list_iterator_destroy(it);
	return held;
}

/* Whether `job` is a data worker job that slurmctld's records back
 * (sched/data_worker.h); `pending` counts its CPUs against the limit. */
static bool _is_data_worker(job_record_t *job, bool pending, char *why,
			    size_t len)
{
	uint32_t trainer_id = gm_companion_trainer_id(job->name);
	struct gm_worker_claim claim = { 0 };
	job_record_t *trainer;

	if (!trainer_id)
		return false;
	claim.worker_uid = job->user_id;
	if (pending)
		claim.worker_cpus = job->details ? job->details->min_cpus : 0;
	trainer = find_job_record(trainer_id);
	if (trainer) {
		claim.trainer_found = 1;
		claim.trainer_uid = trainer->user_id;
		claim.trainer_running = IS_JOB_RUNNING(trainer);
		claim.trainer_spank_env =
			(const char *const *) trainer->spank_job_env;
		claim.trainer_spank_env_size = trainer->spank_job_env_size;
		if (pending)
			claim.cpus_held = _worker_cpus_held(job, trainer_id);
	}
	return gm_verify_data_worker(settings, trainer_id, &claim, why,
				     len) == 1;
}

/* The preemption candidates a job that asks for no GPU may use: all but
 * data workers (those yield their CPUs to GPU jobs only). NULL in, NULL
 * out; a new list (to FREE_NULL_LIST) when some were dropped. */
static list_t *_preemptees_for_cpu_job(list_t *candidates, bool *made)
{
	list_itr_t *it;
	job_record_t *job;
	list_t *kept;
	char why[256];

	*made = false;
	if (!candidates || !list_count(candidates))
		return candidates;
	kept = list_create(NULL);
	it = list_iterator_create(candidates);
	while ((job = list_next(it)))
		if (!_is_data_worker(job, false, why, sizeof(why)))
			list_append(kept, job);
	list_iterator_destroy(it);
	*made = true;
	return kept;
}

/* Sets the `hidden` highest cores of node i that the caller did not
 * exclude in a new bitmap: free ones only, or (`any`, will-run) allocated
 * ones too, so that the reserve holds when cons_tres's simulation lets
 * their jobs end. */
static bitstr_t *_hide_cores(struct gm_call *call, int i, uint32_t hidden,
			     bool any)
{
	node_record_t *node = node_record_table_ptr[i];
	uint32_t offset = cr_get_coremap_offset(i);
	bitstr_t *cores = bit_alloc(node->tot_cores);
	int c;

	for (c = node->tot_cores - 1; c >= 0 && hidden > 0; c--) {
		if ((!any && bit_test(alloc_cores, offset + c)) ||
		    gm_shim_core_excluded(call, i, c))
			continue;
		bit_set(cores, c);
		hidden--;
	}
	return cores;
}

struct gm_view {
	int first, last;		/* candidate node index range */
	struct gm_node_usage *usage;	/* per node index in [first, last] */
	struct gm_node_plan *plan;
};

static void _fill_usage(struct gm_call *call, bitstr_t *node_bitmap,
			struct gm_view *v)
{
	int i, c;

	for (i = v->first; i <= v->last; i++) {
		node_record_t *node = node_record_table_ptr[i];
		struct gm_node_usage *u = &v->usage[i - v->first];
		uint32_t offset;

		if (!node || !bit_test(node_bitmap, i))
			continue;
		offset = cr_get_coremap_offset(i);
		u->cores_total = node->tot_cores;
		u->cpus_per_core = node->threads ? node->threads : 1;
		for (c = 0; c < node->tot_cores; c++)
			if (!bit_test(alloc_cores, offset + c) &&
			    !gm_shim_core_excluded(call, i, c))
				u->cores_free++;
		_node_gpus(node, &u->gpus_total, &u->gpus_free);
	}
}

/* The job's GPU/GRES request for the log: --gres is per node, --gpus per
 * job, --gpus-per-task per task. */
static const char *_gres_request(job_record_t *job_ptr)
{
	if (job_ptr->tres_per_node && *job_ptr->tres_per_node)
		return job_ptr->tres_per_node;
	if (job_ptr->tres_per_job && *job_ptr->tres_per_job)
		return job_ptr->tres_per_job;
	if (job_ptr->tres_per_task && *job_ptr->tres_per_task)
		return job_ptr->tres_per_task;
	return job_ptr->tres_per_socket;
}

/* policy_us: our own work, every cons_tres call excluded; cons_tres_us:
 * the call whose answer was used; tiers_us: calls on tiers tried before. */
static void _log_decision(job_record_t *job_ptr, bitstr_t *node_bitmap,
			  uint32_t min_nodes, uint32_t max_nodes,
			  uint32_t req_nodes, uint16_t mode, int candidates,
			  int rc, const char *policy, double policy_us,
			  double cons_tres_us, double tiers_us)
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
	record.gres = _gres_request(job_ptr);
	record.policy = policy;
	record.policy_us = policy_us;
	record.cons_tres_us = cons_tres_us;
	record.tiers_us = tiers_us;
	gm_format_job_test(&record, line, sizeof(line));
	info("%s: %s", plugin_type, line);
	xfree(selected);
}

/* One job_test call: what it was asked, what it found and what it holds
 * (freed by _end_test). */
struct gm_test {
	job_record_t *job_ptr;
	bitstr_t *node_bitmap;
	struct gm_call *call;
	list_t *preemptee_candidates;	/* as slurmctld gave them */
	int base_mode;
	int kind;			/* GM_JOB_* */
	bool observe;
	struct gm_view v;
	struct gm_plan_summary summary;
	bitstr_t **hidden;		/* per node index, or NULL */
	list_t *preemptees;		/* those a CPU job may use */
	bool own_preemptees;		/* preemptees is ours to free */
	char policy[512];		/* what we decided, for the log */
	double cons_tres_us;		/* every cons_tres call */
	double t_call;			/* the call whose answer was used */
};

/* The job's kind; false when it is cons_tres's alone (no settings, a
 * test-only call, a GPU job: those see every core, reserve included). */
static bool _classify(struct gm_test *t)
{
	char err[512] = "";

	if (!settings || t->base_mode == SELECT_MODE_TEST_ONLY)
		return false;
	t->observe = gm_select_config_observe(settings);
	if (_asks_gpu(t->job_ptr))
		t->kind = GM_JOB_GPU;
	else if (_is_data_worker(t->job_ptr, true, err, sizeof(err)))
		t->kind = GM_JOB_DATA_WORKER;
	else if (gm_companion_trainer_id(t->job_ptr->name))
		/* Named as a worker, not backed by slurmctld's records. */
		snprintf(t->policy, sizeof(t->policy),
			 "not a data worker: %s; ", err);
	return t->kind != GM_JOB_GPU;
}

/* The core's plan for the candidate nodes; false when cons_tres decides
 * alone (no candidates, the core failed, observe mode, nothing to
 * narrow and no preemption to restrict). */
static bool _plan(struct gm_test *t)
{
	char err[512] = "";
	size_t used;
	int n;

	if (usage_dirty || usage_node_count != node_record_count ||
	    !alloc_cores)
		_rebuild_usage();
	t->v.first = bit_ffs(t->node_bitmap);
	if (t->v.first < 0)
		return false;
	t->v.last = bit_fls(t->node_bitmap);
	n = t->v.last - t->v.first + 1;
	t->v.usage = xcalloc(n, sizeof(*t->v.usage));
	t->v.plan = xcalloc(n, sizeof(*t->v.plan));
	_fill_usage(t->call, t->node_bitmap, &t->v);
	if (gm_plan_job_test(settings, t->kind, t->base_mode, t->v.usage, n,
			     t->v.plan, &t->summary, err, sizeof(err))) {
		error("%s: job %u: %s; cons_tres decides alone", plugin_type,
		      t->job_ptr->job_id, err);
		return false;
	}
	used = strlen(t->policy);
	snprintf(t->policy + used, sizeof(t->policy) - used,
		 "%s%s: %u nodes dropped, %u cores reserved%s",
		 t->observe ? "observe, would be " : "",
		 t->kind == GM_JOB_DATA_WORKER ? "data worker" : "cpu job",
		 t->summary.nodes_dropped, t->summary.cores_hidden,
		 t->summary.tiers > 1 ? ", tiered" : "");
	if (t->observe) {
		if (t->summary.narrows &&
		    t->base_mode == SELECT_MODE_RUN_NOW)
			info("%s: job %u: %s", plugin_type,
			     t->job_ptr->job_id, t->policy);
		return false;
	}
	return t->summary.narrows || t->preemptee_candidates;
}

/* Drops the nodes the plan makes unusable, hides the reserved cores of
 * the others and keeps the preemption candidates a CPU job may use. */
static void _narrow(struct gm_test *t)
{
	int i;

	t->hidden = xcalloc(node_record_count, sizeof(bitstr_t *));
	for (i = t->v.first; i <= t->v.last; i++) {
		struct gm_node_plan *p = &t->v.plan[i - t->v.first];

		if (!bit_test(t->node_bitmap, i))
			continue;
		if (!p->usable)
			bit_clear(t->node_bitmap, i);
		else if (p->hidden_cores)
			t->hidden[i] = _hide_cores(t->call, i, p->hidden_cores,
						   p->hide_allocated);
	}
	t->preemptees = _preemptees_for_cpu_job(t->preemptee_candidates,
						&t->own_preemptees);
}

/* cons_tres on `offered` (with the hidden cores, and `preemptees`); its
 * time counted. */
static int _call_cons_tres(struct gm_test *t, bitstr_t *offered,
			   bitstr_t **hidden, list_t *preemptees)
{
	int rc;

	t->t_call = _now_us();
	rc = gm_shim_cons_tres_job_test(t->call, offered, hidden, preemptees);
	t->t_call = _now_us() - t->t_call;
	t->cons_tres_us += t->t_call;
	return rc;
}

/* cons_tres tier by tier (cumulative); only the last may preempt. The
 * nodes of the answering tier are left in node_bitmap. */
static int _test_tiers(struct gm_test *t)
{
	bitstr_t *offered = bit_alloc(bit_size(t->node_bitmap));
	bitstr_t *previous = NULL;
	int rc = SLURM_ERROR, tier, i;
	bool decided = false;

	for (tier = 0; tier < t->summary.tiers && !decided; tier++) {
		bool last = (tier == t->summary.tiers - 1);

		bit_clear_all(offered);
		for (i = t->v.first; i <= t->v.last; i++)
			if (bit_test(t->node_bitmap, i) &&
			    t->v.plan[i - t->v.first].tier <= tier)
				bit_set(offered, i);
		if (!last && (!bit_set_count(offered) ||
			      (previous && bit_equal(previous, offered))))
			continue;
		FREE_NULL_BITMAP(previous);
		previous = bit_copy(offered);
		rc = _call_cons_tres(t, offered, t->hidden,
				     last ? t->preemptees : NULL);
		if (rc == SLURM_SUCCESS || last) {
			bit_copybits(t->node_bitmap, offered);
			decided = true;
		}
	}
	FREE_NULL_BITMAP(offered);
	FREE_NULL_BITMAP(previous);
	return rc;
}

static void _end_test(struct gm_test *t)
{
	int i;

	if (t->hidden) {
		for (i = 0; i < node_record_count; i++)
			FREE_NULL_BITMAP(t->hidden[i]);
		xfree(t->hidden);
	}
	if (t->own_preemptees)
		FREE_NULL_LIST(t->preemptees);
	xfree(t->v.usage);
	xfree(t->v.plan);
}

int gm_job_test(job_record_t *job_ptr, bitstr_t *node_bitmap,
		uint32_t min_nodes, uint32_t max_nodes, uint32_t req_nodes,
		uint16_t mode, list_t *preemptee_candidates,
		struct gm_call *call)
{
	bool trace = slurm_conf.debug_flags & DEBUG_FLAG_SELECT_TYPE;
	int candidates = trace ? bit_set_count(node_bitmap) : 0;
	struct gm_test t = { 0 };
	double t0 = _now_us();
	int rc;

	t.job_ptr = job_ptr;
	t.node_bitmap = node_bitmap;
	t.call = call;
	t.preemptee_candidates = preemptee_candidates;
	t.preemptees = preemptee_candidates;
	t.base_mode = mode & SELECT_MODE_BASE;
	t.kind = GM_JOB_CPU;
	if (_classify(&t) && _plan(&t)) {
		_narrow(&t);
		rc = _test_tiers(&t);
	} else {
		rc = _call_cons_tres(&t, node_bitmap, NULL,
				     preemptee_candidates);
	}
	/* t_call is the answering call; cons_tres_us every call (the tiers
	 * before it added by us, but cons_tres's time, not our code's). */
	if (trace)
		_log_decision(job_ptr, node_bitmap, min_nodes, max_nodes,
			      req_nodes, mode, candidates, rc, t.policy,
			      _now_us() - t0 - t.cons_tres_us, t.t_call,
			      t.cons_tres_us - t.t_call);
	_end_test(&t);
	return rc;
}
