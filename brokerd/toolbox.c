/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "brokerd/toolbox.h"
#include "common/paths.h"
#include "common/util.h"

/* A growing NULL-terminated argv. */
struct strv_b {
	char **v;
	size_t n, cap;
};

static void push(struct strv_b *b, const char *s)
{
	if (b->n + 2 > b->cap) {
		b->cap = b->cap ? b->cap * 2 : 64;
		b->v = rts_xrealloc(b->v, b->cap * sizeof(char *));
	}
	b->v[b->n++] = rts_xstrdup(s);
	b->v[b->n] = NULL;
}

static bool strv_has(char *const *v, const char *s)
{
	for (; v && *v; v++)
		if (strcmp(*v, s) == 0)
			return true;
	return false;
}

/* Key source i of cfg: 0 is apiKey, 1 + k is mcp[k].apiKey; NULL past the last or for a
 * server without one. A new key source of the config (rich.oauthToken, precheck tokens)
 * is numbered here, after these: then its file is hidden from tools and its command runs
 * in the key commands' sandbox like the others. */
/* The config's key sources, numbered as rts_config_key_source() numbers them. */
static const struct rts_key_source *key_source(const struct rts_config *cfg, uint32_t i, const char **label,
					       char *buf, size_t len)
{
	const struct rts_key_source *k = rts_config_key_source(cfg, i, buf, len);
	*label = buf;
	return k;
}

static uint32_t n_key_sources(const struct rts_config *cfg)
{
	return (uint32_t)rts_config_key_sources(cfg);
}

char *const *brokerd_hook_command(const struct rts_config *cfg, enum brokerd_hook h)
{
	const struct rts_rich_conf *rc = &cfg->rich;
	if (!rc->enabled)
		return NULL;
	switch (h) {
	case BROKERD_HOOK_EFFORT_JUDGE:
		return rc->effort_judge;
	case BROKERD_HOOK_MEMORY:
		return rc->memory_command;
	case BROKERD_HOOK_COMPACTION:
		return rc->compaction_command;
	case BROKERD_HOOKS:
		break;
	}
	return NULL;
}

bool brokerd_toolbox_needed(const struct rts_config *cfg)
{
	if (cfg->n_tools > 0)
		return true;
	for (int h = 0; h < BROKERD_HOOKS; h++)
		if (brokerd_hook_command(cfg, (enum brokerd_hook)h))
			return true;
	char buf[96];
	const char *label;
	for (uint32_t i = 0; i < n_key_sources(cfg); i++) {
		const struct rts_key_source *k = key_source(cfg, i, &label, buf, sizeof(buf));
		if (k && k->kind == RTS_KEY_COMMAND)
			return true;
	}
	return false;
}

/* ---- building ---- */

/* A directory to hide and the config key (or option) it comes from, for messages. */
struct hidden {
	char *dir;
	char *why;
};

struct hidden_list {
	struct hidden *h;
	size_t n;
};

static void hidden_add(struct hidden_list *l, const char *dir, const char *why)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->h[i].dir, dir) == 0)
			return;
	l->h = rts_xrealloc(l->h, (l->n + 1) * sizeof(*l->h));
	l->h[l->n++] = (struct hidden){.dir = rts_xstrdup(dir), .why = rts_xstrdup(why)};
}

/* The directory of an absolute file name ("/" for "/x"). */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash == path ? rts_xstrdup("/") : rts_xstrndup(path, (size_t)(slash - path));
}

/* The directory the file at path really lies in (every link resolved, the last
 * component's too), or NULL when path does not resolve now. Free it. */
static char *real_dir_of(const char *path)
{
	cleanup_free char *real = realpath(path, NULL);
	return real ? dir_of(real) : NULL;
}

static void hidden_release(struct hidden_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->h[i].dir);
		free(l->h[i].why);
	}
	free(l->h);
	*l = (struct hidden_list){0};
}

static char **hidden_dirs(const struct hidden_list *l)
{
	char **v = rts_xcalloc(l->n + 1, sizeof(char *));
	for (size_t i = 0; i < l->n; i++)
		v[i] = rts_xstrdup(l->h[i].dir);
	return v;
}

/* A directory a sandbox cannot do without: hiding it would break every program, so a
 * key file or a directory of the suite may not be there. */
static bool needed_by_programs(const char *dir)
{
	static const char *const system[] = {"/usr", "/proc", "/sys", "/dev"};
	if (strcmp(dir, "/") == 0 || !strchr(dir + 1, '/'))
		return true; /* "/" or a top-level directory: /etc, /tmp, /srv, ... */
	for (size_t i = 0; i < RTS_ARRAY_SIZE(system); i++)
		if (rts_path_under(dir, system[i]))
			return true;
	return false;
}

static int check_hidden(const struct hidden_list *l, char *err, size_t errlen)
{
	for (size_t i = 0; i < l->n; i++)
		if (needed_by_programs(l->h[i].dir)) {
			snprintf(err, errlen,
				 "%s: host tools and key commands run with %s hidden, and %s is a directory every "
				 "program needs: give it a directory of its own (for a key file, for example "
				 "/etc/roundtable-sandbox/keys)",
				 l->h[i].why, l->h[i].dir, l->h[i].dir);
			return -EINVAL;
		}
	return 0;
}

static int check_commands(const struct rts_config *cfg, const struct hidden_list *l, char *err, size_t errlen)
{
	for (size_t i = 0; i < cfg->n_tools; i++)
		for (size_t j = 0; cfg->tools[i].command[j]; j++) {
			const char *arg = cfg->tools[i].command[j];
			if (arg[0] != '/')
				continue;
			for (size_t k = 0; k < l->n; k++)
				if (rts_path_within(arg, l->h[k].dir)) {
					snprintf(err, errlen,
						 "%s: tools[%zu].command[%zu]: %s lies in %s (%s), which host tools "
						 "cannot see: keep tool programs and their files elsewhere",
						 cfg->path, i, j, arg, l->h[k].dir, l->h[k].why);
					return -EINVAL;
				}
		}
	static const char *const hook_key[] = {"rich.effort.judge.command", "rich.memory.command", "rich.compaction.command"};
	_Static_assert(RTS_ARRAY_SIZE(hook_key) == BROKERD_HOOKS, "a config key per hook");
	for (int h = 0; h < BROKERD_HOOKS; h++) {
		char *const *argv = brokerd_hook_command(cfg, (enum brokerd_hook)h);
		for (size_t j = 0; argv && argv[j]; j++) {
			if (argv[j][0] != '/')
				continue;
			for (size_t k = 0; k < l->n; k++)
				if (rts_path_within(argv[j], l->h[k].dir)) {
					snprintf(err, errlen,
						 "%s: %s[%zu]: %s lies in %s (%s), which rich hooks cannot see: keep "
						 "hook programs and their files elsewhere",
						 cfg->path, hook_key[h], j, argv[j], l->h[k].dir, l->h[k].why);
					return -EINVAL;
				}
		}
	}
	return 0;
}

static int check_write_path(const struct rts_config *cfg, size_t i, size_t k, const struct hidden_list *l,
			    bool writable, char *err, size_t errlen)
{
	const char *p = cfg->tools[i].write_paths[k];
	char at[64];
	snprintf(at, sizeof(at), "tools[%zu].writePaths[%zu]", i, k);
	cleanup_free char *real = realpath(p, NULL);
	if (!real) {
		int e = errno;
		snprintf(err, errlen, "%s: %s: %s: %s (it must be an existing directory)", cfg->path, at, p,
			 strerror(e));
		return -e;
	}
	if (strcmp(real, p) != 0) {
		snprintf(err, errlen,
			 "%s: %s: %s is or goes through a symbolic link (it is %s): name the real directory",
			 cfg->path, at, p, real);
		return -EINVAL;
	}
	struct stat st;
	if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: %s: %s is not a directory", cfg->path, at, p);
		return -ENOTDIR;
	}
	if (writable && faccessat(AT_FDCWD, p, W_OK | X_OK, AT_EACCESS) < 0) {
		int e = errno;
		snprintf(err, errlen,
			 "%s: %s: this account cannot write %s (%s); under systemd, list it in ReadWritePaths= of "
			 "a drop-in for roundtable-sandbox-launcher@.service",
			 cfg->path, at, p, strerror(e));
		return -e;
	}
	for (size_t h = 0; h < l->n; h++)
		if (rts_path_within(p, l->h[h].dir) || rts_path_within(l->h[h].dir, p)) {
			snprintf(err, errlen,
				 "%s: %s: %s and %s (%s) overlap: host tools cannot see %s, so they may write neither "
				 "in it nor around it",
				 cfg->path, at, p, l->h[h].dir, l->h[h].why, l->h[h].dir);
			return -EINVAL;
		}
	return 0;
}

int brokerd_toolbox_new(const struct rts_config *cfg, const char *runtime_dir, const char *credentials_dir,
			const char *bwrap, const char *tini, bool writable, struct brokerd_toolbox **out, char *err,
			size_t errlen)
{
	*out = NULL;
	struct hidden_list suite = {0}, keys = {0};
	int r = 0;

	/* Every run: the daemons' sockets, every turn's broker socket, the guests'
	 * workspaces and the channel states. A tool that guest input steers must not be able
	 * to reach control.sock (and switch a channel off) or another turn's broker. */
	cleanup_free char *rt = realpath(runtime_dir, NULL);
	hidden_add(&suite, rt ? rt : runtime_dir, "--runtime-dir");
	hidden_add(&suite, cfg->run_root, "runRoot");
	hidden_add(&suite, cfg->workspace_root, "workspaceRoot");
	cleanup_free char *state_dir = dir_of(cfg->state_file);
	hidden_add(&suite, state_dir, "stateFile");

	/* Tools alone: every key source, and the config that names them. */
	char buf[96], why[128];
	const char *label;
	for (uint32_t i = 0; i < n_key_sources(cfg); i++) {
		const struct rts_key_source *k = key_source(cfg, i, &label, buf, sizeof(buf));
		if (!k || k->kind != RTS_KEY_FILE)
			continue;
		cleanup_free char *d = dir_of(k->value);
		snprintf(why, sizeof(why), "%s.file", label);
		hidden_add(&keys, d, why);
		/* And where the file really is, should a link lead elsewhere (brokerd refuses a
		 * link as the last component, but the key stays readable where it points). */
		cleanup_free char *real = real_dir_of(k->value);
		if (real)
			hidden_add(&keys, real, why);
	}
	if (credentials_dir && credentials_dir[0] == '/')
		hidden_add(&keys, credentials_dir, "$CREDENTIALS_DIRECTORY");
	cleanup_free char *conf = realpath(cfg->path, NULL);
	if (conf) {
		cleanup_free char *d = dir_of(conf);
		hidden_add(&keys, d, "the config file's directory");
	}

	if (brokerd_toolbox_needed(cfg)) {
		const char *const progs[] = {bwrap, tini};
		const char *const pkgs[] = {"bubblewrap", "tini"};
		for (size_t i = 0; i < 2 && r == 0; i++)
			if (progs[i][0] != '/' || access(progs[i], X_OK) < 0) {
				snprintf(err, errlen,
					 "cannot run host tools or key commands: %s is missing or not executable "
					 "(install the Debian package %s)",
					 progs[i], pkgs[i]);
				r = -ENOENT;
			}
		if (r == 0)
			r = check_hidden(&suite, err, errlen);
		if (r == 0 && cfg->n_tools > 0)
			r = check_hidden(&keys, err, errlen);
		if (r == 0)
			r = check_commands(cfg, &suite, err, errlen);
		if (r == 0)
			r = check_commands(cfg, &keys, err, errlen);
		for (size_t i = 0; r == 0 && i < cfg->n_tools; i++)
			for (size_t k = 0; r == 0 && k < cfg->tools[i].n_write_paths; k++) {
				r = check_write_path(cfg, i, k, &suite, writable, err, errlen);
				if (r == 0)
					r = check_write_path(cfg, i, k, &keys, writable, err, errlen);
			}
	}
	if (r == 0) {
		struct brokerd_toolbox *tb = rts_xcalloc(1, sizeof(*tb));
		*tb = (struct brokerd_toolbox){
			.cfg = cfg,
			.bwrap = rts_xstrdup(bwrap),
			.tini = rts_xstrdup(tini),
			.suite_dirs = hidden_dirs(&suite),
			.key_dirs = hidden_dirs(&keys),
			.key_files = rts_xcalloc(n_key_sources(cfg) + 1, sizeof(char *)),
			.probe_argv = rts_xcalloc(3, sizeof(char *)),
		};
		for (uint32_t i = 0, n = 0; i < n_key_sources(cfg); i++) {
			const struct rts_key_source *k = key_source(cfg, i, &label, buf, sizeof(buf));
			if (k && k->kind == RTS_KEY_FILE)
				tb->key_files[n++] = rts_xstrdup(k->value);
		}
		tb->probe_argv[0] = rts_xstrdup(tini);
		tb->probe_argv[1] = rts_xstrdup("--version");
		*out = tb;
	}
	hidden_release(&suite);
	hidden_release(&keys);
	return r;
}

void brokerd_toolbox_free(struct brokerd_toolbox *tb)
{
	if (!tb)
		return;
	free(tb->bwrap);
	free(tb->tini);
	rts_strv_free(tb->suite_dirs);
	rts_strv_free(tb->key_dirs);
	rts_strv_free(tb->key_files);
	rts_strv_free(tb->probe_argv);
	free(tb);
}

/* ---- one run ---- */

char *const *brokerd_toolbox_command(const struct brokerd_toolbox *tb, enum brokerd_run_kind kind, uint32_t index)
{
	const struct rts_config *cfg = tb->cfg;
	char buf[96];
	const char *label;
	switch (kind) {
	case BROKERD_RUN_TOOL:
		return index < cfg->n_tools ? cfg->tools[index].command : NULL;
	case BROKERD_RUN_KEY_COMMAND: {
		const struct rts_key_source *k = index < n_key_sources(cfg) ? key_source(cfg, index, &label, buf, sizeof(buf))
									    : NULL;
		return k && k->kind == RTS_KEY_COMMAND ? k->argv : NULL;
	}
	case BROKERD_RUN_PROBE_TOOL:
		return index < cfg->n_tools ? tb->probe_argv : NULL;
	case BROKERD_RUN_PROBE_KEY:
		return index == 0 ? tb->probe_argv : NULL;
	case BROKERD_RUN_HOOK:
		return index < BROKERD_HOOKS ? brokerd_hook_command(cfg, (enum brokerd_hook)index) : NULL;
	case BROKERD_RUN_PROBE_HOOK:
		return index == 0 ? tb->probe_argv : NULL;
	}
	return NULL;
}

static int by_length(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
	return la < lb ? -1 : la > lb ? 1 : strcmp(*(char *const *)a, *(char *const *)b);
}

/* Hide each directory of dirs that exists now, by its real name, unless another one
 * holds it (its mount point would not exist under that one's empty tmpfs): a directory
 * comes before anything inside it, so shorter names first. */
static void hide(struct strv_b *b, char *const *dirs)
{
	size_t n = 0;
	cleanup_strv char **real = rts_xcalloc(rts_strv_len(dirs) + 1, sizeof(char *));
	for (char *const *d = dirs; d && *d; d++) {
		char *r = realpath(*d, NULL);
		struct stat st;
		if (r && stat(r, &st) == 0 && S_ISDIR(st.st_mode) && !strv_has(real, r))
			real[n++] = r;
		else
			free(r); /* nothing there to hide now */
	}
	qsort(real, n, sizeof(char *), by_length);
	for (size_t i = 0; i < n; i++) {
		bool covered = false;
		for (size_t j = 0; j < i && !covered; j++)
			covered = rts_path_under(real[i], real[j]);
		if (covered)
			continue;
		/* Empty, mode 0, then read-only: the tool can neither list nor fill it. */
		const char *const op[] = {"--perms", "0000", "--tmpfs", real[i], "--remount-ro", real[i]};
		for (size_t k = 0; k < RTS_ARRAY_SIZE(op); k++)
			push(b, op[k]);
	}
}

int brokerd_toolbox_argv(const struct brokerd_toolbox *tb, enum brokerd_run_kind kind, uint32_t index, int info_fd,
			 char ***argv)
{
	*argv = NULL;
	const struct rts_config *cfg = tb->cfg;
	bool tool = kind == BROKERD_RUN_TOOL || kind == BROKERD_RUN_PROBE_TOOL;
	/* A hook is the operator's code fed guest text, like a tool: no key source for it. */
	bool hide_keys = tool || kind == BROKERD_RUN_HOOK || kind == BROKERD_RUN_PROBE_HOOK;
	if (!brokerd_toolbox_command(tb, kind, index))
		return -EINVAL;

	struct strv_b b = {0};
	char num[16];
	push(&b, tb->bwrap);
	/* Namespaces of its own but the network's (DESIGN.md 8.1: tools call services). */
	const char *const ns[] = {"--unshare-user", "--unshare-ipc",	     "--unshare-pid",	"--unshare-uts",
				  "--unshare-cgroup-try", "--disable-userns", "--die-with-parent", "--new-session",
				  "--as-pid-1"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ns); i++)
		push(&b, ns[i]);
	snprintf(num, sizeof(num), "%d", info_fd);
	push(&b, "--info-fd");
	push(&b, num);
	const char *const fs[] = {"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(fs); i++)
		push(&b, fs[i]);
	if (tool)
		for (size_t i = 0; i < cfg->tools[index].n_write_paths; i++) {
			push(&b, "--bind");
			push(&b, cfg->tools[index].write_paths[i]);
			push(&b, cfg->tools[index].write_paths[i]);
		}
	/* Last, so that nothing bound above can uncover them. */
	size_t n_suite = rts_strv_len(tb->suite_dirs), n_keys = hide_keys ? rts_strv_len(tb->key_dirs) : 0;
	size_t n_files = hide_keys ? rts_strv_len(tb->key_files) : 0;
	cleanup_free char **all = rts_xcalloc(n_suite + n_keys + n_files + 1, sizeof(char *));
	/* Where each key file really lies now: a link made since start-up may lead out of
	 * the directories above (brokerd refuses to read it, but the target is a key). */
	cleanup_strv char **now = rts_xcalloc(n_files + 1, sizeof(char *));
	for (size_t i = 0, n = 0; i < n_files; i++) {
		char *d = real_dir_of(tb->key_files[i]);
		if (d)
			now[n++] = d;
	}
	size_t n = 0;
	for (size_t i = 0; i < n_suite; i++)
		all[n++] = tb->suite_dirs[i];
	for (size_t i = 0; i < n_keys; i++)
		all[n++] = tb->key_dirs[i];
	for (size_t i = 0; now[i]; i++)
		all[n++] = now[i];
	hide(&b, all);
	push(&b, "--chdir");
	push(&b, "/");
	push(&b, "--");
	push(&b, tb->tini);
	push(&b, "-g");
	push(&b, "--");
	for (char *const *a = brokerd_toolbox_command(tb, kind, index); *a; a++)
		push(&b, *a);
	*argv = b.v;
	return 0;
}
