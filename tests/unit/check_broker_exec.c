/* SPDX-License-Identifier: Apache-2.0 */
/* Host commands (tools, key commands) and credential sources: real commands started by a
 * real launcher in real sandboxes (bubblewrap and tini must be installed), real files;
 * the deadline, the turn closing and the output bound stop a command, nothing of brokerd's
 * environment or descriptors leaks into it, nothing it leaves behind survives, and keys
 * fail closed. */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "brokerd/exec.h"
#include "brokerd/keys.h"
#include "brokerd/launcher.h"
#include "brokerd/toolbox.h"
#include "common/json.h"
#include "common/sandbox.h"
#include "common/util.h"

static char tmpdir[64];

/* A config that has the command under test as its one tool (or as apiKey's command), with
 * the suite's directories in tmpdir, and a launcher started for it. */
struct rig {
	struct rts_config cfg;
	struct rts_tool tool;
	char *write_paths[2];
	struct brokerd_toolbox *tb;
	struct brokerd_launcher *l;
};

static void rig_start(struct rig *g, char *const *tool_argv, char *const *key_argv, const char *writable)
{
	*g = (struct rig){0};
	g->write_paths[0] = (char *)writable;
	g->tool = (struct rts_tool){.name = "t", .command = (char **)tool_argv, .timeout_ms = 30000,
				    .write_paths = g->write_paths, .n_write_paths = writable ? 1 : 0};
	g->cfg = (struct rts_config){
		.path = "/nonexistent/sandbox.json",
		.run_root = rts_xasprintf("%s/run", tmpdir),
		.workspace_root = rts_xasprintf("%s/ws", tmpdir),
		.state_file = rts_xasprintf("%s/state/channels.json", tmpdir),
		.tools = tool_argv ? &g->tool : NULL,
		.n_tools = tool_argv ? 1 : 0,
		.api_key = key_argv ? (struct rts_key_source){.kind = RTS_KEY_COMMAND, .argv = (char **)key_argv}
				    : (struct rts_key_source){.kind = RTS_KEY_ENV, .value = "RTS_TEST_MODEL_KEY"},
	};
	cleanup_free char *rt = rts_xasprintf("%s/rt", tmpdir);
	char err[1024] = "";
	int r = brokerd_toolbox_new(&g->cfg, rt, NULL, RTS_BWRAP, RTS_TINI, true, &g->tb, err, sizeof(err));
	ck_assert_msg(r == 0, "toolbox: %s", err);
	ck_assert_int_eq(brokerd_launcher_start(g->tb, &g->l), 0);
	brokerd_exec_init(g->l);
}

static void rig_stop(struct rig *g)
{
	brokerd_exec_init(NULL);
	brokerd_launcher_stop(g->l);
	brokerd_toolbox_free(g->tb);
	free(g->cfg.run_root);
	free(g->cfg.workspace_root);
	free(g->cfg.state_file);
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_broker_exec.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	cleanup_free char *cmd = rts_xasprintf("rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static struct brokerd_cancel in_ms(uint64_t ms)
{
	return (struct brokerd_cancel){.wake_fd = -1, .closing = NULL, .deadline_ms = rts_now_ms() + ms};
}

/* Run argv as a host tool (that may write in writable, or nowhere when NULL). */
static int run_in(char *const *argv, const char *writable, const char *input, size_t max, struct brokerd_cancel c,
		  struct brokerd_exec_result *r)
{
	struct rig g;
	rig_start(&g, argv, NULL, writable);
	struct brokerd_exec e = {
		.tool = &g.cfg.tools[0],
		.input = input,
		.input_len = input ? strlen(input) : 0,
		.max_output = max,
		.cancel = c,
		.stderr_label = "test",
		.turn_id = "0123456789abcdef",
	};
	int ret = brokerd_exec_run(&e, r);
	rig_stop(&g);
	return ret;
}

static int run(char *const *argv, const char *input, size_t max, struct brokerd_cancel c, struct brokerd_exec_result *r)
{
	return run_in(argv, NULL, input, max, c, r);
}

START_TEST(test_cat_large_input)
{
	/* Larger than a pipe buffer in both directions: stdin is written while stdout is read. */
	size_t n = 300 * 1024;
	cleanup_free char *in = rts_xmalloc(n + 1);
	for (size_t i = 0; i < n; i++)
		in[i] = (char)('a' + i % 26);
	in[n] = '\0';
	char *const argv[] = {"/bin/cat", NULL};
	struct brokerd_exec_result r;
	ck_assert_int_eq(run(argv, in, 1024 * 1024, in_ms(10000), &r), 0);
	ck_assert_int_eq(r.exit_status, 0);
	ck_assert_uint_eq(r.len, n);
	ck_assert(memcmp(r.output, in, n) == 0);
	free(r.output);
}
END_TEST

static char *run_output(char *const *argv)
{
	struct brokerd_exec_result r;
	ck_assert_int_eq(run(argv, NULL, 4096, in_ms(10000), &r), 0);
	ck_assert_int_eq(r.exit_status, 0);
	return r.output;
}

START_TEST(test_environment_cwd_fds_session)
{
	setenv("RTS_SECRET_FOR_TEST", "do-not-leak", 1);
	char *const env[] = {"/usr/bin/env", NULL};
	cleanup_free char *e = run_output(env);
	ck_assert_str_eq(e, "PATH=/usr/bin:/bin\nPWD=/\n"); /* bwrap always sets PWD */

	char *const pwd[] = {"/bin/pwd", NULL};
	cleanup_free char *p = run_output(pwd);
	ck_assert_str_eq(p, "/\n");

	/* An fd of ours without CLOEXEC must not reach the command either. */
	int leak = open("/dev/null", O_RDONLY);
	ck_assert_int_ge(leak, 3);
	char *const fds[] = {"/bin/ls", "/proc/self/fd", NULL};
	cleanup_free char *f = run_output(fds);
	close(leak);
	ck_assert_str_eq(f, "0\n1\n2\n3\n"); /* 3 is ls's own directory handle */

	/* A process group of its own, under the sandbox's PID 1, which leads the session. */
	char *const sid[] = {"/bin/sh", "-c", "set -- $(cat /proc/$$/stat); [ \"$5\" = \"$$\" ] && [ \"$6\" = 1 ] && echo leader",
			     NULL};
	cleanup_free char *s = run_output(sid);
	ck_assert_str_eq(s, "leader\n");
}
END_TEST

START_TEST(test_exit_status)
{
	char *const fail[] = {"/bin/sh", "-c", "echo out; exit 3", NULL};
	struct brokerd_exec_result r;
	ck_assert_int_eq(run(fail, NULL, 4096, in_ms(10000), &r), 0);
	ck_assert_int_eq(r.exit_status, 3);
	ck_assert_str_eq(r.output, "out\n");
	free(r.output);
	/* The sandbox's PID 1 reports a signal's end the shell's way: 128 + the signal. */
	char *const killed[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
	ck_assert_int_eq(run(killed, NULL, 4096, in_ms(10000), &r), 0);
	ck_assert_int_eq(r.exit_status, 128 + SIGKILL);
	free(r.output);
	char *const missing[] = {"/nonexistent/tool", NULL};
	ck_assert_int_eq(run(missing, NULL, 4096, in_ms(10000), &r), -ENOENT);
}
END_TEST

START_TEST(test_deadline)
{
	char *const argv[] = {"/bin/sleep", "30", NULL};
	struct brokerd_exec_result r;
	uint64_t t0 = rts_now_ms();
	ck_assert_int_eq(run(argv, NULL, 4096, in_ms(300), &r), -ETIMEDOUT);
	uint64_t took = rts_now_ms() - t0;
	ck_assert_msg(took >= 300 && took < 1500, "took %llu ms", (unsigned long long)took);
}
END_TEST

START_TEST(test_sigterm_ignored_then_sigkill)
{
	char *const argv[] = {"/bin/sh", "-c", "trap '' TERM; sleep 30", NULL};
	struct brokerd_exec_result r;
	uint64_t t0 = rts_now_ms();
	ck_assert_int_eq(run(argv, NULL, 4096, in_ms(200), &r), -ETIMEDOUT);
	uint64_t took = rts_now_ms() - t0;
	ck_assert_msg(took >= 200 + BROKERD_KILL_GRACE_MS && took < 200 + BROKERD_KILL_GRACE_MS + 1500,
		      "took %llu ms", (unsigned long long)took);
}
END_TEST

START_TEST(test_output_bound)
{
	char *const argv[] = {"/usr/bin/yes", NULL};
	struct brokerd_exec_result r;
	uint64_t t0 = rts_now_ms();
	ck_assert_int_eq(run(argv, NULL, 1000, in_ms(10000), &r), -EFBIG);
	ck_assert_uint_lt(rts_now_ms() - t0, 3000);
}
END_TEST

static atomic_bool closing;
static int wake_fd = -1;
static char *started_path; /* the command creates it once it runs */

/* Close the turn once the command runs (or after 10 s, and the test then fails on its
 * own: the command would not have been cancelled while running). */
static void *close_when_started(void *arg)
{
	(void)arg;
	uint64_t deadline = rts_now_ms() + 10000;
	while (access(started_path, F_OK) != 0 && rts_now_ms() < deadline) {
		struct timespec ts = {.tv_nsec = 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	atomic_store(&closing, true);
	uint64_t one = 1;
	ck_assert_int_eq(write(wake_fd, &one, sizeof(one)), 8);
	return NULL;
}

START_TEST(test_turn_closing_cancels)
{
	atomic_store(&closing, false);
	cleanup_free char *out = rts_xasprintf("%s/out", tmpdir);
	ck_assert_int_eq(mkdir(out, 0755), 0);
	started_path = rts_xasprintf("%s/started", out);
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(wake_fd, 0);
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, close_when_started, NULL), 0);
	char *const argv[] = {"/bin/sh", "-c", ": >\"$0\"; exec /bin/sleep 30", started_path, NULL};
	struct brokerd_exec_result r;
	struct brokerd_cancel c = {.wake_fd = wake_fd, .closing = &closing, .deadline_ms = rts_now_ms() + 30000};
	uint64_t t0 = rts_now_ms();
	ck_assert_int_eq(run_in(argv, out, NULL, 4096, c, &r), -ECANCELED);
	ck_assert_uint_lt(rts_now_ms() - t0, 2500); /* the launcher's start and stop included */
	pthread_join(th, NULL);
	ck_assert_int_eq(access(started_path, F_OK), 0);
	close(wake_fd);
	free(started_path);
}
END_TEST

/* Host processes in the PID namespace ns ("pid:[inode]"). */
static int pidns_members(const char *ns)
{
	int n = 0;
	DIR *d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char path[64], link[64] = "";
		snprintf(path, sizeof(path), "/proc/%s/ns/pid", de->d_name);
		ssize_t k = readlink(path, link, sizeof(link) - 1);
		if (k > 0 && (link[k] = '\0', strcmp(link, ns) == 0))
			n++;
	}
	closedir(d);
	return n;
}

/* A process the command leaves behind does not outlive the call: its sandbox is gone. */
START_TEST(test_stragglers_killed)
{
	char *const argv[] = {"/bin/sh", "-c", "sleep 30 >/dev/null 2>&1 & readlink /proc/self/ns/pid", NULL};
	struct brokerd_exec_result r;
	ck_assert_int_eq(run(argv, NULL, 4096, in_ms(10000), &r), 0);
	char ns[64];
	ck_assert_int_eq(sscanf(r.output, "%63s", ns), 1);
	free(r.output);
	ck_assert(strncmp(ns, "pid:[", 5) == 0);
	int left = -1;
	for (int i = 0; i < 100 && left != 0; i++) {
		left = pidns_members(ns);
		struct timespec ts = {.tv_nsec = 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	ck_assert_msg(left == 0, "%d processes of the sandbox %s still run", left, ns);
}
END_TEST

/* A tool writes its writePaths, and nothing else: a file elsewhere is not created. */
START_TEST(test_writes_only_its_write_paths)
{
	cleanup_free char *mine = rts_xasprintf("%s/mine", tmpdir);
	cleanup_free char *other = rts_xasprintf("%s/other", tmpdir);
	ck_assert_int_eq(mkdir(mine, 0755), 0);
	ck_assert_int_eq(mkdir(other, 0755), 0);
	cleanup_free char *script = rts_xasprintf("echo ok > '%s/f' && echo written; echo no > '%s/f' || echo refused; "
						  "echo no > '%s/f' || echo refused; echo x > /dev/null && echo null",
						  mine, other, tmpdir);
	char *const argv[] = {"/bin/sh", "-c", script, NULL};
	struct brokerd_exec_result r;
	ck_assert_int_eq(run_in(argv, mine, NULL, 4096, in_ms(10000), &r), 0);
	ck_assert_str_eq(r.output, "written\nrefused\nrefused\nnull\n");
	free(r.output);
	cleanup_free char *f1 = rts_xasprintf("%s/f", mine);
	cleanup_free char *f2 = rts_xasprintf("%s/f", other);
	cleanup_free char *f3 = rts_xasprintf("%s/f", tmpdir);
	ck_assert_int_eq(access(f1, F_OK), 0);
	ck_assert_int_ne(access(f2, F_OK), 0);
	ck_assert_int_ne(access(f3, F_OK), 0);
}
END_TEST

/* The whole path under brokerd's own seccomp filter, in a forked child (a filter cannot
 * be removed again): the launcher forked first, as brokerd does, then the filter; a run
 * answers, and one that ignores SIGTERM is stopped at its deadline with SIGKILL. Exit 0
 * when both did. */
static int run_under_brokerd_filter(void)
{
	char *const argv[] = {"/bin/sh", "-c", "read -r l; echo \"$l\"; if [ \"$l\" = wait ]; then trap '' TERM; sleep 30; fi",
			      NULL};
	struct rig g;
	rig_start(&g, argv, NULL, NULL);
	if (rts_sandbox_init() < 0 || rts_sandbox_apply(RTS_SANDBOX_BROKERD) < 0)
		return 10;
	struct brokerd_exec e = {.tool = &g.cfg.tools[0], .input = "in\n", .input_len = 3, .max_output = 64,
				 .cancel = in_ms(10000), .stderr_label = "test", .turn_id = "0123456789abcdef"};
	struct brokerd_exec_result r;
	if (brokerd_exec_run(&e, &r) != 0 || r.exit_status != 0 || strcmp(r.output, "in\n") != 0)
		return 11;
	free(r.output);
	e.input = "wait\n";
	e.input_len = 5;
	e.cancel = in_ms(300);
	uint64_t t0 = rts_now_ms();
	if (brokerd_exec_run(&e, &r) != -ETIMEDOUT || rts_now_ms() - t0 < 300 + BROKERD_KILL_GRACE_MS)
		return 12;
	rig_stop(&g);
	return 0;
}

START_TEST(test_under_brokerd_filter)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(run_under_brokerd_filter());
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the confined run ended with status 0x%x", st);
}
END_TEST

/* ---- credentials ---- */

static const struct brokerd_binding binding = {
	.turn_id = "0123456789abcdef",
	.channel = "guild:1/chan:2",
	.speaker_id = "42",
	.speaker_name = "Alice \"A\"",
	.principal_id = "",
	.deadline_ms = UINT64_MAX,
};

static char *write_file(const char *name, const char *content)
{
	char *path = rts_xasprintf("%s/%s", tmpdir, name);
	FILE *f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	fputs(content, f);
	fclose(f);
	return path;
}

static int read_key(const struct rts_key_source *src, char **key, size_t *len)
{
	struct brokerd_cancel c = in_ms(20000);
	return brokerd_key_read(src, &binding, &c, key, len);
}

START_TEST(test_key_valid)
{
	ck_assert(brokerd_key_valid("sk-abc_123.x~", 13));
	ck_assert(!brokerd_key_valid("", 0));
	ck_assert(!brokerd_key_valid("a b", 3));
	ck_assert(!brokerd_key_valid("ab\n", 3));
	ck_assert(!brokerd_key_valid("ab\r", 3));
	ck_assert(!brokerd_key_valid("a\tb", 3));
	ck_assert(!brokerd_key_valid("a\x7f", 2));
	ck_assert(!brokerd_key_valid("\xc3\xa4", 2));
	ck_assert(!brokerd_key_valid("a\0b", 3));
}
END_TEST

START_TEST(test_key_file)
{
	char *key = NULL;
	size_t len = 0;
	cleanup_free char *p1 = write_file("k1", "sk-from-file\n");
	struct rts_key_source src = {.kind = RTS_KEY_FILE, .value = p1};
	ck_assert_int_eq(read_key(&src, &key, &len), 0);
	ck_assert_str_eq(key, "sk-from-file");
	ck_assert_uint_eq(len, 12);
	brokerd_key_free(key, len);

	/* only one newline is stripped; what is left is not a key */
	cleanup_free char *p2 = write_file("k2", "sk-from-file\n\n");
	src.value = p2;
	ck_assert_int_eq(read_key(&src, &key, &len), -ENOKEY);
	ck_assert_ptr_null(key);
	cleanup_free char *p3 = write_file("k3", "");
	src.value = p3;
	ck_assert_int_eq(read_key(&src, &key, &len), -ENOKEY);
	cleanup_free char *p4 = rts_xasprintf("%s/missing", tmpdir);
	src.value = p4;
	ck_assert_int_eq(read_key(&src, &key, &len), -ENOKEY);
	/* a FIFO must not block the call */
	cleanup_free char *p5 = rts_xasprintf("%s/fifo", tmpdir);
	ck_assert_int_eq(mkfifo(p5, 0600), 0);
	src.value = p5;
	ck_assert_int_eq(read_key(&src, &key, &len), -ENOKEY);
	/* a link to a good key file is refused; a link on the way to it is not */
	cleanup_free char *p6 = rts_xasprintf("%s/link", tmpdir);
	ck_assert_int_eq(symlink(p1, p6), 0);
	src.value = p6;
	ck_assert_int_eq(read_key(&src, &key, &len), -ENOKEY);
	ck_assert_ptr_null(key);
	cleanup_free char *p7 = rts_xasprintf("%s/dirlink", tmpdir);
	ck_assert_int_eq(symlink(tmpdir, p7), 0);
	cleanup_free char *p8 = rts_xasprintf("%s/dirlink/k1", tmpdir);
	src.value = p8;
	ck_assert_int_eq(read_key(&src, &key, &len), 0);
	brokerd_key_free(key, len);

	/* start-up refuses the link too, naming the config key */
	struct rts_config cfg = {.path = "/etc/x.json", .api_key = {.kind = RTS_KEY_FILE, .value = p1}};
	char err[512] = "";
	ck_assert_int_eq(brokerd_key_files_check(&cfg, err, sizeof(err)), 0);
	cfg.api_key.value = p8;
	ck_assert_int_eq(brokerd_key_files_check(&cfg, err, sizeof(err)), 0);
	cfg.api_key.value = p4; /* missing now: may appear later */
	ck_assert_int_eq(brokerd_key_files_check(&cfg, err, sizeof(err)), 0);
	cfg.api_key.value = p6;
	ck_assert_int_eq(brokerd_key_files_check(&cfg, err, sizeof(err)), -ELOOP);
	ck_assert_ptr_nonnull(strstr(err, "apiKey.file: "));
	ck_assert_ptr_nonnull(strstr(err, "is a symbolic link"));
}
END_TEST

START_TEST(test_key_env_and_credential)
{
	char *key = NULL;
	size_t len = 0;
	struct rts_key_source env = {.kind = RTS_KEY_ENV, .value = "RTS_TEST_MODEL_KEY"};
	unsetenv("RTS_TEST_MODEL_KEY");
	ck_assert_int_eq(read_key(&env, &key, &len), -ENOKEY);
	setenv("RTS_TEST_MODEL_KEY", "sk-env", 1);
	ck_assert_int_eq(read_key(&env, &key, &len), 0);
	ck_assert_str_eq(key, "sk-env");
	brokerd_key_free(key, len);
	setenv("RTS_TEST_MODEL_KEY", "sk env", 1);
	ck_assert_int_eq(read_key(&env, &key, &len), -ENOKEY);

	cleanup_free char *p = write_file("model-api-key", "sk-cred\n");
	struct rts_key_source cred = {.kind = RTS_KEY_CREDENTIAL, .value = "model-api-key"};
	unsetenv("CREDENTIALS_DIRECTORY");
	ck_assert_int_eq(read_key(&cred, &key, &len), -ENOKEY);
	setenv("CREDENTIALS_DIRECTORY", tmpdir, 1);
	ck_assert_int_eq(read_key(&cred, &key, &len), 0);
	ck_assert_str_eq(key, "sk-cred");
	brokerd_key_free(key, len);
	/* a symlink in the credentials directory is not followed */
	cleanup_free char *link = rts_xasprintf("%s/linked", tmpdir);
	ck_assert_int_eq(symlink(p, link), 0);
	struct rts_key_source linked = {.kind = RTS_KEY_CREDENTIAL, .value = "linked"};
	ck_assert_int_eq(read_key(&linked, &key, &len), -ENOKEY);
	unsetenv("CREDENTIALS_DIRECTORY");
}
END_TEST

/* A key command's key, read through a launcher started for a config whose apiKey it is. */
static int read_command_key(char *const *argv, char **key, size_t *len)
{
	struct rig g;
	rig_start(&g, NULL, argv, NULL);
	int r = read_key(&g.cfg.api_key, key, len);
	rig_stop(&g);
	return r;
}

START_TEST(test_key_command)
{
	char *key = NULL;
	size_t len = 0;
	/* The key names what the command got on stdin (as hex: a key has no spaces). Key
	 * commands see the key files but write nothing. */
	char *argv[] = {"/bin/sh", "-c", "printf sk-; od -An -v -tx1 | tr -d ' \\n'", NULL};
	ck_assert_int_eq(read_command_key(argv, &key, &len), 0);
	const char *want = "{\"channel\":\"guild:1/chan:2\",\"speaker\":{\"id\":\"42\",\"name\":\"Alice \\\"A\\\"\","
			   "\"principalId\":null}}";
	ck_assert_uint_eq(len, 3 + 2 * strlen(want));
	ck_assert(strncmp(key, "sk-", 3) == 0);
	for (size_t i = 0; i < strlen(want); i++) {
		unsigned v;
		ck_assert_int_eq(sscanf(key + 3 + 2 * i, "%2x", &v), 1);
		ck_assert_msg((char)v == want[i], "stdin byte %zu is %c, not %c", i, (char)v, want[i]);
	}
	brokerd_key_free(key, len);

	char *fail[] = {"/bin/sh", "-c", "echo sk-x; exit 1", NULL};
	ck_assert_int_eq(read_command_key(fail, &key, &len), -ENOKEY);
	char *empty[] = {"/bin/true", NULL};
	ck_assert_int_eq(read_command_key(empty, &key, &len), -ENOKEY);
	char *huge[] = {"/usr/bin/yes", NULL};
	ck_assert_int_eq(read_command_key(huge, &key, &len), -ENOKEY);
	/* A key source that is not of the launcher's config runs nothing. */
	struct rts_key_source stray = {.kind = RTS_KEY_COMMAND, .argv = empty};
	struct rig g;
	rig_start(&g, NULL, argv, NULL);
	ck_assert_int_eq(read_key(&stray, &key, &len), -ENOKEY);
	rig_stop(&g);
}
END_TEST

int main(void)
{
	/* As in brokerd: a child writing to a closed pipe must not kill the test. */
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("broker_exec");
	TCase *tc = tcase_create("exec");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_cat_large_input);
	tcase_add_test(tc, test_environment_cwd_fds_session);
	tcase_add_test(tc, test_exit_status);
	tcase_add_test(tc, test_deadline);
	tcase_add_test(tc, test_sigterm_ignored_then_sigkill);
	tcase_add_test(tc, test_output_bound);
	tcase_add_test(tc, test_turn_closing_cancels);
	tcase_add_test(tc, test_stragglers_killed);
	tcase_add_test(tc, test_writes_only_its_write_paths);
	tcase_add_test(tc, test_under_brokerd_filter);
	suite_add_tcase(s, tc);
	tc = tcase_create("keys");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_key_valid);
	tcase_add_test(tc, test_key_file);
	tcase_add_test(tc, test_key_env_and_credential);
	tcase_add_test(tc, test_key_command);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
