/*
 * Finding and loading Slurm's own select/cons_tres, which
 * select/goldminer_cons_tres wraps: every call it does not narrow goes to
 * cons_tres unchanged. If cons_tres cannot be loaded, init fails and
 * slurmctld reports it; no call ever reaches a missing function.
 */
#include "select_plugin/shim.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "src/common/xmalloc.h"
#include "src/common/xstring.h"

static void *cons_tres_handle;
/* Called for its effect only: fini returns int up to 24.11, void from
 * 25.05 on. */
static void (*cons_tres_fini)(void);

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

int gm_load_cons_tres(const struct gm_syms *tables, size_t count)
{
	char path[PATH_MAX];
	int (*cons_tres_init)(void);
	bool already_loaded;
	size_t t, i;

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
	for (t = 0; t < count; t++)
		for (i = 0; i < tables[t].n; i++) {
			const char *name = tables[t].names[i];

			tables[t].slots[i] = dlsym(cons_tres_handle, name);
			if (!tables[t].slots[i]) {
				error("%s: %s lacks %s", plugin_type, path,
				      name);
				gm_unload_cons_tres();
				return SLURM_ERROR;
			}
		}
	if (!already_loaded) {
		cons_tres_init = dlsym(cons_tres_handle, "init");
		cons_tres_fini = dlsym(cons_tres_handle, "fini");
		if (cons_tres_init && cons_tres_init() != SLURM_SUCCESS) {
			error("%s: init of %s failed", plugin_type, path);
			cons_tres_fini = NULL;
			gm_unload_cons_tres();
			return SLURM_ERROR;
		}
	}
	/* Clients (sinfo, scontrol) load select plugins too: stay quiet. */
	verbose("%s loaded, delegating to %s", plugin_type, path);
	return SLURM_SUCCESS;
}

void gm_unload_cons_tres(void)
{
	if (cons_tres_fini)
		cons_tres_fini();
	cons_tres_fini = NULL;
	if (cons_tres_handle)
		dlclose(cons_tres_handle);
	cons_tres_handle = NULL;
}
