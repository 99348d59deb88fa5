/* SPDX-License-Identifier: Apache-2.0 */
/* brokerd's launcher protocol (brokerd/launcher.h) over real SEQPACKET socket pairs, the
 * bwrap info it reads, and the toolbox (brokerd/toolbox.h): the start-up rules that refuse
 * a config, and the sandbox each kind of run gets, read from bwrap's argv. */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "brokerd/launcher.h"
#include "brokerd/toolbox.h"
#include "common/util.h"

/* ---- messages ---- */

static struct brokerd_launch_msg msg(uint32_t type, uint32_t kind, uint32_t index, int32_t value)
{
	return (struct brokerd_launch_msg){
		.version = BROKERD_LAUNCH_VERSION, .type = type, .kind = kind, .index = index, .value = value};
}

static int decode(struct brokerd_launch_msg m, size_t nfds)
{
	struct brokerd_launch_msg out;
	return brokerd_launch_decode(&m, sizeof(m), nfds, &out);
}

START_TEST(test_decode)
{
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_RUN, BROKERD_RUN_TOOL, 3, 0), 4), 0);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_RUN, BROKERD_RUN_PROBE_KEY, 0, 0), 4), 0);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_RUN, BROKERD_RUN_HOOK, 2, 0), 4), 0);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_RUN, BROKERD_RUN_PROBE_HOOK, 0, 0), 4), 0);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_STARTED, 0, 0, 0), 1), 0);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_FAILED, 0, 0, -ENOENT), 0), 0);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_EXITED, 0, 0, 137 << 8), 0), 0);

	/* Each rule: the same message minus the bad part passes above. */
	struct brokerd_launch_msg m = msg(BROKERD_LAUNCH_RUN, BROKERD_RUN_TOOL, 0, 0);
	m.version = BROKERD_LAUNCH_VERSION + 1;
	ck_assert_int_eq(decode(m, 4), -EBADMSG);
	ck_assert_int_eq(decode(msg(4, 0, 0, 0), 0), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_RUN, BROKERD_RUN_TOOL, 0, 0), 3), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_RUN, BROKERD_RUN_TOOL, 0, 0), 5), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_RUN, 0, 0, 0), 4), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_RUN, BROKERD_RUN_PROBE_HOOK + 1, 0, 0), 4), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_RUN, BROKERD_RUN_TOOL, 0, 1), 4), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_STARTED, 0, 0, 0), 0), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_STARTED, 0, 0, 1), 1), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_STARTED, 1, 0, 0), 1), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_FAILED, 0, 0, 0), 0), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_FAILED, 0, 0, 5), 0), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_FAILED, 0, 0, -4096), 0), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_FAILED, 0, 0, -ENOENT), 1), -EBADMSG);
	ck_assert_int_eq(decode(msg(BROKERD_LAUNCH_EXITED, 0, 1, 0), 0), -EBADMSG);
	m = msg(BROKERD_LAUNCH_EXITED, 0, 0, 0);
	struct brokerd_launch_msg out;
	ck_assert_int_eq(brokerd_launch_decode(&m, sizeof(m) - 1, 0, &out), -EBADMSG);
	char longer[sizeof(m) + 1] = {0};
	memcpy(longer, &m, sizeof(m));
	ck_assert_int_eq(brokerd_launch_decode(longer, sizeof(longer), 0, &out), -EBADMSG);
}
END_TEST

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* How many descriptors this process has open. */
static int open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		n += fd_open(fd);
	return n;
}

START_TEST(test_send_and_receive)
{
	int sp[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	const int four[4] = {p[0], p[1], p[0], p[1]};
	struct brokerd_launch_msg m = msg(BROKERD_LAUNCH_RUN, BROKERD_RUN_KEY_COMMAND, 2, 0), got;
	ck_assert_int_eq(brokerd_launch_send(sp[0], &m, four, 4), 0);
	int fds[BROKERD_LAUNCH_FDS_MAX];
	size_t n;
	ck_assert_int_eq(brokerd_launch_recv(sp[1], &got, fds, &n), 0);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(got.kind, BROKERD_RUN_KEY_COMMAND);
	ck_assert_uint_eq(got.index, 2);
	for (size_t i = 0; i < n; i++) {
		ck_assert(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
		close(fds[i]);
	}
	ck_assert_int_eq(brokerd_launch_recv(sp[1], &got, fds, &n), -EAGAIN);

	/* A RUN with three descriptors, and a FAILED with one: refused, and what came is
	 * closed. */
	int before = open_fds();
	ck_assert_int_eq(brokerd_launch_send(sp[0], &m, four, 3), 0);
	ck_assert_int_eq(brokerd_launch_recv(sp[1], &got, fds, &n), -EBADMSG);
	ck_assert_uint_eq(n, 0);
	struct brokerd_launch_msg f = msg(BROKERD_LAUNCH_FAILED, 0, 0, -EIO);
	ck_assert_int_eq(brokerd_launch_send(sp[0], &f, four, 1), 0);
	ck_assert_int_eq(brokerd_launch_recv(sp[1], &got, fds, &n), -EBADMSG);
	ck_assert_int_eq(open_fds(), before);

	/* A packet longer than a message. */
	char big[64] = {0};
	memcpy(big, &f, sizeof(f));
	ck_assert_int_eq(send(sp[0], big, sizeof(big), 0), (ssize_t)sizeof(big));
	ck_assert_int_eq(brokerd_launch_recv(sp[1], &got, fds, &n), -EBADMSG);

	/* The end of the stream. */
	close(sp[0]);
	ck_assert_int_eq(brokerd_launch_recv(sp[1], &got, fds, &n), -ECONNRESET);
	close(sp[1]);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_parse_info)
{
	const char *info = "{\n    \"child-pid\": 19933,\n    \"cgroup-namespace\": 4026532183,\n"
			   "    \"pid-namespace\": 4026532182\n}\n";
	pid_t pid = 0;
	ck_assert_int_eq(brokerd_launch_parse_info(info, strlen(info), &pid), 0);
	ck_assert_int_eq(pid, 19933);
	/* Cut anywhere before its end: more is needed. */
	for (size_t n = 0; n < strlen(info) - 2; n++)
		ck_assert_int_eq(brokerd_launch_parse_info(info, n, &pid), -EAGAIN);
	const char *bad[] = {"[1]", "{\"child-pid\": 0}", "{\"child-pid\": -3}", "{\"child-pid\": \"12\"}",
			     "{\"child-pid\": 1.5}", "{\"child-pid\": 99999999999}", "{}", "{\"child-pid\": 1}}",
			     "nonsense"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(brokerd_launch_parse_info(bad[i], strlen(bad[i]), &pid) == -EBADMSG, "accepted %s", bad[i]);
}
END_TEST

/* ---- the toolbox ---- */

static char tmpdir[64];

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_broker_toolbox.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	cleanup_free char *cmd = rts_xasprintf("rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static char *in_tmp(const char *name)
{
	return rts_xasprintf("%s/%s", tmpdir, name);
}

static void make_dir(const char *name)
{
	cleanup_free char *p = in_tmp(name);
	ck_assert_int_eq(mkdir(p, 0755), 0);
}

/* A config as brokerd's tests lay it out: every directory in tmpdir, the key file and the
 * config in etc/, one tool python3 tools/t.py, writing what writable names (NULL-terminated
 * list, may be NULL), and the apiKey as given. */
struct setup {
	struct rts_config cfg;
	struct rts_tool tool;
	char *tool_argv[4];
	char **write_paths;
};

static void config(struct setup *s, char **writable, struct rts_key_source api_key)
{
	*s = (struct setup){0};
	s->tool_argv[0] = "/usr/bin/python3";
	s->tool_argv[1] = in_tmp("tools/t.py");
	s->write_paths = writable;
	size_t n = 0;
	while (writable && writable[n])
		n++;
	static char *none[] = {NULL};
	s->tool = (struct rts_tool){.name = "t", .command = s->tool_argv, .timeout_ms = 1000,
				    .write_paths = writable ? writable : none, .n_write_paths = n};
	s->cfg = (struct rts_config){
		.path = in_tmp("etc/sandbox.json"),
		.run_root = in_tmp("run"),
		.workspace_root = in_tmp("ws"),
		.state_file = in_tmp("state/channels.json"),
		.api_key = api_key,
		.tools = &s->tool,
		.n_tools = 1,
	};
}

static void release(struct setup *s)
{
	free(s->tool_argv[1]);
	free(s->cfg.path);
	free(s->cfg.run_root);
	free(s->cfg.workspace_root);
	free(s->cfg.state_file);
}

static void make_layout(void)
{
	const char *dirs[] = {"etc", "run", "ws", "state", "rt", "tools", "out", "creds"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		make_dir(dirs[i]);
	cleanup_free char *conf = in_tmp("etc/sandbox.json");
	int fd = open(conf, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

/* brokerd_toolbox_new() on s; returns its result, err filled. */
static int build(struct setup *s, const char *creds, struct brokerd_toolbox **tb, char *err, size_t len)
{
	cleanup_free char *rt = in_tmp("rt");
	return brokerd_toolbox_new(&s->cfg, rt, creds, RTS_BWRAP, RTS_TINI, true, tb, err, len);
}

static void assert_refused(struct setup *s, const char *creds, const char *says)
{
	struct brokerd_toolbox *tb = NULL;
	char err[1024] = "";
	ck_assert_int_lt(build(s, creds, &tb, err, sizeof(err)), 0);
	ck_assert_ptr_null(tb);
	ck_assert_msg(strstr(err, says), "expected \"%s\" in: %s", says, err);
}

static struct rts_key_source key_file(const char *name)
{
	return (struct rts_key_source){.kind = RTS_KEY_FILE, .value = in_tmp(name)};
}

/* Index of s in argv, or -1. */
static int find(char *const *argv, const char *s, int from)
{
	for (int i = from; argv[i]; i++)
		if (strcmp(argv[i], s) == 0)
			return i;
	return -1;
}

/* True when argv hides dir: --tmpfs DIR and --remount-ro DIR. */
static bool hides(char *const *argv, const char *dir)
{
	for (int i = 0; argv[i] && argv[i + 1]; i++)
		if (strcmp(argv[i], "--tmpfs") == 0 && strcmp(argv[i + 1], dir) == 0)
			return argv[i + 2] && argv[i + 3] && strcmp(argv[i + 2], "--remount-ro") == 0 &&
			       strcmp(argv[i + 3], dir) == 0 && i >= 2 && strcmp(argv[i - 2], "--perms") == 0 &&
			       strcmp(argv[i - 1], "0000") == 0;
	return false;
}

START_TEST(test_argv_of_each_kind)
{
	make_layout();
	cleanup_free char *out = in_tmp("out");
	char *writable[] = {out, NULL};
	struct setup s;
	config(&s, writable, key_file("etc/api-key"));
	cleanup_free char *creds = in_tmp("creds");
	struct brokerd_toolbox *tb = NULL;
	char err[1024] = "";
	ck_assert_msg(build(&s, creds, &tb, err, sizeof(err)) == 0, "%s", err);

	cleanup_strv char **a = NULL;
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_TOOL, 0, 3, &a), 0);
	ck_assert_str_eq(a[0], RTS_BWRAP);
	/* Namespaces of its own, the host's network. */
	const char *want[] = {"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--disable-userns",
			      "--die-with-parent", "--new-session", "--as-pid-1"};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(find(a, want[i], 0) > 0, "no %s", want[i]);
	ck_assert_int_lt(find(a, "--unshare-net", 0), 0);
	ck_assert_int_lt(find(a, "--unshare-all", 0), 0);
	ck_assert_int_lt(find(a, "--seccomp", 0), 0);
	int i = find(a, "--info-fd", 0);
	ck_assert_str_eq(a[i + 1], "3");
	/* The host read-only, a fresh /dev and /proc, the writePath read-write. */
	i = find(a, "--ro-bind", 0);
	ck_assert(i > 0 && strcmp(a[i + 1], "/") == 0 && strcmp(a[i + 2], "/") == 0);
	i = find(a, "--bind", 0);
	ck_assert(i > 0 && strcmp(a[i + 1], out) == 0 && strcmp(a[i + 2], out) == 0);
	ck_assert_int_lt(find(a, "--bind", i + 1), 0);
	ck_assert_str_eq(a[find(a, "--proc", 0) + 1], "/proc");
	ck_assert_str_eq(a[find(a, "--dev", 0) + 1], "/dev");
	/* Every key source and the suite's directories hidden, after every bind. */
	const char *hidden[] = {"etc", "creds", "run", "ws", "state", "rt"};
	for (size_t k = 0; k < sizeof(hidden) / sizeof(hidden[0]); k++) {
		cleanup_free char *d = in_tmp(hidden[k]);
		ck_assert_msg(hides(a, d), "%s is not hidden from a tool", d);
		ck_assert_int_gt(find(a, d, find(a, "--bind", 0) + 3), 0);
	}
	cleanup_free char *tools = in_tmp("tools");
	ck_assert(!hides(a, tools));
	/* tini as PID 1, passing signals to the command's group, then the command. */
	i = find(a, "--", 0);
	ck_assert_str_eq(a[i + 1], RTS_TINI);
	ck_assert_str_eq(a[i + 2], "-g");
	ck_assert_str_eq(a[i + 3], "--");
	ck_assert_str_eq(a[i + 4], "/usr/bin/python3");
	ck_assert_str_eq(a[i + 5], s.tool_argv[1]);
	ck_assert_ptr_null(a[i + 6]);
	ck_assert_str_eq(a[find(a, "--chdir", 0) + 1], "/");

	/* The key commands' sandbox: the key sources visible, the suite's directories not,
	 * nothing writable. */
	rts_strv_free(a);
	a = NULL;
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_PROBE_KEY, 0, 3, &a), 0);
	for (size_t k = 0; k < sizeof(hidden) / sizeof(hidden[0]); k++) {
		cleanup_free char *d = in_tmp(hidden[k]);
		bool key_source = k < 2;
		ck_assert_msg(hides(a, d) == !key_source, "%s: hidden %d", d, hides(a, d));
	}
	ck_assert_int_lt(find(a, "--bind", 0), 0);
	i = find(a, "--", 0);
	ck_assert_str_eq(a[i + 4], RTS_TINI);
	ck_assert_str_eq(a[i + 5], "--version");

	/* A rich hook: the operator's code fed guest text, so like a tool without writePaths:
	 * the key sources hidden too (rich.oauthToken among them). Only configured hooks run. */
	rts_strv_free(a);
	a = NULL;
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_HOOK, BROKERD_HOOK_MEMORY, 3, &a), -EINVAL);
	char *memory_argv[] = {"/usr/bin/python3", "/memory.py", NULL};
	s.cfg.rich.enabled = true;
	s.cfg.rich.memory_command = memory_argv;
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_HOOK, BROKERD_HOOK_MEMORY, 3, &a), 0);
	for (size_t k = 0; k < sizeof(hidden) / sizeof(hidden[0]); k++) {
		cleanup_free char *d = in_tmp(hidden[k]);
		ck_assert_msg(hides(a, d), "%s is not hidden from a hook", d);
	}
	ck_assert_int_lt(find(a, "--bind", 0), 0);
	i = find(a, "--", 0);
	ck_assert_str_eq(a[i + 4], "/usr/bin/python3");
	ck_assert_str_eq(a[i + 5], "/memory.py");
	rts_strv_free(a);
	a = NULL;
	/* The start-up probe of the hooks' sandbox: the same sandbox, tini --version in it. */
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_PROBE_HOOK, 0, 3, &a), 0);
	for (size_t k = 0; k < sizeof(hidden) / sizeof(hidden[0]); k++) {
		cleanup_free char *d = in_tmp(hidden[k]);
		ck_assert_msg(hides(a, d), "%s is not hidden from the hooks' probe", d);
	}
	ck_assert_int_lt(find(a, "--bind", 0), 0);
	i = find(a, "--", 0);
	ck_assert_str_eq(a[i + 4], RTS_TINI);
	ck_assert_str_eq(a[i + 5], "--version");
	rts_strv_free(a);
	a = NULL;
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_PROBE_HOOK, 1, 3, &a), -EINVAL);
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_HOOK, BROKERD_HOOK_COMPACTION, 3, &a), -EINVAL);
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_HOOK, BROKERD_HOOKS, 3, &a), -EINVAL);
	s.cfg.rich.enabled = false;
	s.cfg.rich.memory_command = NULL;

	/* What the config does not have runs nothing. */
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_TOOL, 1, 3, &a), -EINVAL);
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_KEY_COMMAND, 0, 3, &a), -EINVAL); /* a file key */
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_PROBE_KEY, 1, 3, &a), -EINVAL);
	ck_assert_int_eq(brokerd_toolbox_argv(tb, (enum brokerd_run_kind)9, 0, 3, &a), -EINVAL);
	ck_assert_ptr_null(a);
	brokerd_toolbox_free(tb);
	free(s.cfg.api_key.value);
	release(&s);
}
END_TEST

/* A directory hidden inside another hidden one is not mounted again (its mount point
 * does not exist under the empty tmpfs); one that does not exist is skipped. */
START_TEST(test_nested_and_missing_hidden_directories)
{
	make_layout();
	make_dir("rt/turns");
	struct setup s;
	config(&s, NULL, (struct rts_key_source){.kind = RTS_KEY_ENV, .value = "K"});
	free(s.cfg.run_root);
	s.cfg.run_root = in_tmp("rt/turns");
	free(s.cfg.workspace_root);
	s.cfg.workspace_root = in_tmp("not-made");
	struct brokerd_toolbox *tb = NULL;
	char err[1024] = "";
	ck_assert_msg(build(&s, NULL, &tb, err, sizeof(err)) == 0, "%s", err);
	cleanup_strv char **a = NULL;
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_TOOL, 0, 3, &a), 0);
	cleanup_free char *rt = in_tmp("rt");
	ck_assert(hides(a, rt));
	ck_assert_int_lt(find(a, s.cfg.run_root, 0), 0);
	ck_assert_int_lt(find(a, s.cfg.workspace_root, 0), 0);
	brokerd_toolbox_free(tb);
	release(&s);
}
END_TEST

static void make_file(const char *name)
{
	cleanup_free char *p = in_tmp(name);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

static void make_link(const char *target, const char *name)
{
	cleanup_free char *t = in_tmp(target), *p = in_tmp(name);
	ck_assert_int_eq(symlink(t, p), 0);
}

/* A tool's sandbox built for s hides dir (a name in tmpdir). */
static bool tool_hides(struct brokerd_toolbox *tb, const char *dir)
{
	cleanup_strv char **a = NULL;
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_TOOL, 0, 3, &a), 0);
	cleanup_free char *d = in_tmp(dir);
	return hides(a, d);
}

/* A key file's real directory is hidden as well as the one the config names: a link as
 * the key file (which brokerd refuses to read, but whose target is a key), a link as a
 * directory on the way, and a link made after start-up. */
START_TEST(test_real_key_directories)
{
	make_layout();
	const char *dirs[] = {"vault", "keys", "vault2", "vault3", "keys3"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		make_dir(dirs[i]);
	make_file("vault/api-key");
	make_link("vault/api-key", "keys/api-key");
	make_file("vault2/api-key");
	make_link("vault2", "linkdir");
	make_file("vault3/api-key");
	make_file("keys3/api-key");

	struct setup s;
	config(&s, NULL, key_file("keys/api-key"));
	struct brokerd_toolbox *tb = NULL;
	char err[1024] = "";
	ck_assert_msg(build(&s, NULL, &tb, err, sizeof(err)) == 0, "%s", err);
	ck_assert(tool_hides(tb, "keys"));
	ck_assert(tool_hides(tb, "vault"));
	ck_assert(!tool_hides(tb, "vault2")); /* not a key's: what hides vault/ is the rule */
	brokerd_toolbox_free(tb);
	free(s.cfg.api_key.value);
	release(&s);

	config(&s, NULL, key_file("linkdir/api-key"));
	ck_assert_msg(build(&s, NULL, &tb, err, sizeof(err)) == 0, "%s", err);
	ck_assert(tool_hides(tb, "vault2"));
	brokerd_toolbox_free(tb);
	free(s.cfg.api_key.value);
	release(&s);

	/* keys3/api-key is a file at start, a link to vault3/ at the next run. */
	config(&s, NULL, key_file("keys3/api-key"));
	ck_assert_msg(build(&s, NULL, &tb, err, sizeof(err)) == 0, "%s", err);
	ck_assert(tool_hides(tb, "keys3"));
	ck_assert(!tool_hides(tb, "vault3"));
	cleanup_free char *k3 = in_tmp("keys3/api-key");
	ck_assert_int_eq(unlink(k3), 0);
	make_link("vault3/api-key", "keys3/api-key");
	ck_assert(tool_hides(tb, "keys3"));
	ck_assert(tool_hides(tb, "vault3"));
	/* The key commands' sandbox sees key sources, wherever they are. */
	cleanup_strv char **a = NULL;
	s.cfg.n_tools = 0;
	ck_assert_int_eq(brokerd_toolbox_argv(tb, BROKERD_RUN_PROBE_KEY, 0, 3, &a), 0);
	cleanup_free char *v3 = in_tmp("vault3");
	ck_assert(!hides(a, v3));
	brokerd_toolbox_free(tb);
	free(s.cfg.api_key.value);
	release(&s);

	/* A key file linked into a directory every program needs stops the start. */
	cleanup_free char *hostname = in_tmp("keys/host");
	ck_assert_int_eq(symlink("/etc/hostname", hostname), 0);
	config(&s, NULL, key_file("keys/host"));
	assert_refused(&s, NULL, "apiKey.file: host tools and key commands run with /etc hidden");
	free(s.cfg.api_key.value);
	release(&s);
}
END_TEST

START_TEST(test_refusals)
{
	make_layout();
	make_dir("etc/tools");
	struct setup s;
	cleanup_free char *out = in_tmp("out");
	cleanup_free char *missing = in_tmp("missing");
	cleanup_free char *link = in_tmp("link");
	cleanup_free char *file = in_tmp("file");
	cleanup_free char *ws_inner = in_tmp("ws/inner");
	cleanup_free char *tmp_root = rts_xstrdup(tmpdir);
	ck_assert_int_eq(symlink(out, link), 0);
	int fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	make_dir("ws/inner");

	/* Each writePath rule, and the same config with a good writePath passes. */
	char *good[] = {out, NULL};
	config(&s, good, key_file("etc/api-key"));
	struct brokerd_toolbox *tb = NULL;
	char err[1024] = "";
	ck_assert_msg(build(&s, NULL, &tb, err, sizeof(err)) == 0, "%s", err);
	brokerd_toolbox_free(tb);
	free(s.cfg.api_key.value);
	release(&s);
	const struct {
		char *path;
		const char *says;
	} bad[] = {
		{missing, "tools[0].writePaths[0]: " /* then strerror */},
		{link, "is or goes through a symbolic link"},
		{file, "is not a directory"},
		{ws_inner, "(workspaceRoot) overlap"},
		{tmp_root, "overlap"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *w[] = {bad[i].path, NULL};
		config(&s, w, key_file("etc/api-key"));
		assert_refused(&s, NULL, bad[i].says);
		free(s.cfg.api_key.value);
		release(&s);
	}

	/* A key file in a directory every program needs. */
	config(&s, NULL, (struct rts_key_source){.kind = RTS_KEY_FILE, .value = "/etc/model.key"});
	assert_refused(&s, NULL, "apiKey.file: host tools and key commands run with /etc hidden");
	release(&s);
	/* ... which matters only when there is a tool to hide it from. */
	config(&s, NULL, (struct rts_key_source){.kind = RTS_KEY_FILE, .value = "/etc/model.key"});
	char *key_argv[] = {"/bin/true", NULL};
	s.cfg.n_tools = 0;
	s.cfg.api_key = (struct rts_key_source){.kind = RTS_KEY_COMMAND, .argv = key_argv};
	ck_assert_msg(build(&s, NULL, &tb, err, sizeof(err)) == 0, "%s", err);
	brokerd_toolbox_free(tb);
	release(&s);
	/* The suite's directories may not be there either, whoever runs. */
	config(&s, NULL, (struct rts_key_source){.kind = RTS_KEY_ENV, .value = "K"});
	free(s.cfg.workspace_root);
	s.cfg.workspace_root = rts_xstrdup("/srv");
	assert_refused(&s, NULL, "workspaceRoot: host tools and key commands run with /srv hidden");
	release(&s);
	config(&s, NULL, (struct rts_key_source){.kind = RTS_KEY_ENV, .value = "K"});
	assert_refused(&s, "/run", "$CREDENTIALS_DIRECTORY: host tools and key commands run with /run hidden");
	release(&s);

	/* A tool whose program or script lies where tools cannot see. */
	config(&s, NULL, key_file("etc/api-key"));
	free(s.tool_argv[1]);
	s.tool_argv[1] = in_tmp("etc/tools/t.py");
	assert_refused(&s, NULL, "tools[0].command[1]: ");
	free(s.cfg.api_key.value);
	release(&s);
	config(&s, NULL, (struct rts_key_source){.kind = RTS_KEY_ENV, .value = "K"});
	free(s.tool_argv[1]);
	s.tool_argv[1] = in_tmp("ws/t.py");
	assert_refused(&s, NULL, "(workspaceRoot), which host tools cannot see");
	release(&s);
	/* A rich hook likewise, and one alone (no tool) needs the launcher. */
	config(&s, NULL, (struct rts_key_source){.kind = RTS_KEY_ENV, .value = "K"});
	s.cfg.n_tools = 0;
	cleanup_free char *hook_script = in_tmp("ws/memory.py");
	char *hook_argv[] = {"/usr/bin/python3", hook_script, NULL};
	s.cfg.rich.enabled = true;
	s.cfg.rich.memory_command = hook_argv;
	ck_assert(brokerd_toolbox_needed(&s.cfg));
	assert_refused(&s, NULL, "rich.memory.command[1]: ");
	s.cfg.rich.enabled = false;
	s.cfg.rich.memory_command = NULL;
	release(&s);

	/* bwrap and tini must be there. */
	config(&s, NULL, (struct rts_key_source){.kind = RTS_KEY_ENV, .value = "K"});
	cleanup_free char *rt = in_tmp("rt");
	ck_assert_int_lt(brokerd_toolbox_new(&s.cfg, rt, NULL, "/nonexistent/bwrap", RTS_TINI, true, &tb, err, sizeof(err)),
			 0);
	ck_assert_ptr_nonnull(strstr(err, "install the Debian package bubblewrap"));
	ck_assert_int_lt(brokerd_toolbox_new(&s.cfg, rt, NULL, RTS_BWRAP, "/nonexistent/tini", true, &tb, err, sizeof(err)),
			 0);
	ck_assert_ptr_nonnull(strstr(err, "install the Debian package tini"));
	/* Without a tool or key command, nothing is checked and no launcher is needed. */
	s.cfg.n_tools = 0;
	ck_assert(!brokerd_toolbox_needed(&s.cfg));
	ck_assert_int_eq(brokerd_toolbox_new(&s.cfg, rt, NULL, "/nonexistent/bwrap", RTS_TINI, true, &tb, err, sizeof(err)),
			 0);
	brokerd_toolbox_free(tb);
	release(&s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_toolbox");
	TCase *tc = tcase_create("protocol");
	tcase_add_test(tc, test_decode);
	tcase_add_test(tc, test_send_and_receive);
	tcase_add_test(tc, test_parse_info);
	suite_add_tcase(s, tc);
	tc = tcase_create("toolbox");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_argv_of_each_kind);
	tcase_add_test(tc, test_nested_and_missing_hidden_directories);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_real_key_directories);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
