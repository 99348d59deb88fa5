/* SPDX-License-Identifier: Apache-2.0 */
/* common/spawn.c: real child processes (sh, cat, env, ls), no Docker, no privileges.
 * Output stays within its bounds, a deadline or a cancellation stops the child and its
 * process group, the child sees exactly the environment and descriptors it was given, and
 * how it ended is reported as the kernel saw it; also under runnerd's seccomp filter,
 * which the spawner must fit, and for children started elsewhere (brokerd's launcher). */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/sandbox.h"
#include "common/spawn.h"
#include "common/util.h"

static char *const no_env[] = {NULL};
static char tmpdir[64];

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_spawn.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	cleanup_free char *cmd = rts_xasprintf("rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* stdout and stderr captured, stdin from /dev/null, PATH only. */
static struct rts_spawn piped(char *const *argv)
{
	static char *const env[] = {"PATH=/usr/bin:/bin", NULL};
	return (struct rts_spawn){
		.argv = argv,
		.envp = env,
		.in = RTS_STDIO_NULL,
		.out = RTS_STDIO_PIPE,
		.out_max = 1024 * 1024,
		.err = RTS_STDIO_PIPE,
		.err_max = RTS_SPAWN_ERR_MAX,
	};
}

static struct rts_cancel within(uint64_t ms)
{
	struct rts_cancel c = RTS_CANCEL_NONE;
	c.deadline_ms = rts_now_ms() + ms;
	return c;
}

/* Run argv under sh -c script to its end; returns its stdout (caller frees). */
static char *sh_output(const char *script)
{
	char *const argv[] = {"/bin/sh", "-c", (char *)script, NULL};
	struct rts_spawn s = piped(argv);
	struct rts_cancel c = within(10000);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert(r.exited);
	ck_assert_int_eq(r.status, 0);
	char *out = steal_pointer(&r.out);
	rts_spawn_result_release(&r);
	return out;
}

/* True once pid is gone or a zombie of someone else's (waited for up to 2 s). */
static bool process_gone(pid_t pid)
{
	for (int i = 0; i < 100; i++) {
		char path[64], state = 0;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		FILE *f = fopen(path, "re");
		bool gone = !f || fscanf(f, "%*d %*s %c", &state) != 1 || state == 'Z';
		if (f)
			fclose(f);
		if (gone)
			return true;
		struct timespec ts = {.tv_nsec = 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return false;
}

/* The pid a script wrote to path. */
static pid_t read_pid(const char *path)
{
	for (int i = 0; i < 100; i++) {
		FILE *f = fopen(path, "re");
		int pid = 0;
		bool got = f && fscanf(f, "%d", &pid) == 1;
		if (f)
			fclose(f);
		if (got && pid > 1)
			return (pid_t)pid;
		struct timespec ts = {.tv_nsec = 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	ck_abort_msg("no pid in %s", path);
	return -1;
}

/* ---- output bounds ---- */

START_TEST(test_stdout_exactly_at_the_bound)
{
	char *const argv[] = {"/bin/sh", "-c", "head -c 1000 /dev/zero", NULL};
	struct rts_spawn s = piped(argv);
	s.out_max = 1000;
	struct rts_cancel c = within(10000);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert_uint_eq(r.out_len, 1000);
	ck_assert_int_eq(r.out[1000], '\0');
	rts_spawn_result_release(&r);

	/* One byte more is an overflow: no output, the child stopped. */
	char *const more[] = {"/bin/sh", "-c", "head -c 1001 /dev/zero", NULL};
	s.argv = more;
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -EFBIG);
	ck_assert_ptr_null(r.out);
	rts_spawn_result_release(&r);
}
END_TEST

START_TEST(test_endless_stdout_is_stopped)
{
	char *const argv[] = {"/usr/bin/yes", NULL};
	struct rts_spawn s = piped(argv);
	s.out_max = 4096;
	struct rts_cancel c = within(30000);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -EFBIG);
	/* Stopped by the bound (-EFBIG, not the deadline's -ETIME): killed, by the SIGKILL
	 * sent before the pipe closes or, when the kernel delivers the write's SIGPIPE first
	 * (seen under load), by that. */
	ck_assert(!r.exited);
	ck_assert_msg(r.status == SIGKILL || r.status == SIGPIPE, "status %d", r.status);
	rts_spawn_result_release(&r);
}
END_TEST

START_TEST(test_stderr_keeps_its_head_and_never_blocks)
{
	/* 256 KiB of stderr, more than a pipe holds, and stdout after it: the child finishes
	 * only because the rest of stderr is read and dropped. */
	char *const argv[] = {"/bin/sh", "-c", "echo first line >&2; head -c 262144 /dev/zero >&2; echo done", NULL};
	struct rts_spawn s = piped(argv);
	s.err_max = 100;
	struct rts_cancel c = within(10000);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert_str_eq(r.out, "done\n");
	ck_assert_uint_eq(r.err_len, 100);
	ck_assert(strncmp(r.err, "first line\n", 11) == 0);
	rts_spawn_result_release(&r);
	/* Above RTS_SPAWN_ERR_MAX the bound is RTS_SPAWN_ERR_MAX. */
	s.err_max = 1u << 20;
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert_uint_eq(r.err_len, RTS_SPAWN_ERR_MAX);
	rts_spawn_result_release(&r);
}
END_TEST

START_TEST(test_stdin_larger_than_a_pipe)
{
	/* Written while stdout is read: neither side can block the other. */
	size_t n = 300 * 1024;
	cleanup_free char *in = rts_xmalloc(n);
	for (size_t i = 0; i < n; i++)
		in[i] = (char)('a' + i % 26);
	char *const argv[] = {"/bin/cat", NULL};
	struct rts_spawn s = piped(argv);
	s.in = RTS_STDIO_PIPE;
	s.input = in;
	s.input_len = n;
	struct rts_cancel c = within(10000);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert_uint_eq(r.out_len, n);
	ck_assert(memcmp(r.out, in, n) == 0);
	rts_spawn_result_release(&r);

	/* A child that reads nothing: EPIPE for us, and its own exit decides. */
	char *const deaf[] = {"/bin/sh", "-c", "exec 0<&-; echo ignored", NULL};
	s.argv = deaf;
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert_str_eq(r.out, "ignored\n");
	rts_spawn_result_release(&r);

	/* An empty input is an immediate end of file. */
	char *const count[] = {"/usr/bin/wc", "-c", NULL};
	s.argv = count;
	s.input_len = 0;
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert_str_eq(r.out, "0\n");
	rts_spawn_result_release(&r);
}
END_TEST

/* ---- deadlines, cancellation, the kill sequence ---- */

START_TEST(test_deadline_kills_and_reaps)
{
	cleanup_free char *pidfile = rts_xasprintf("%s/pid", tmpdir);
	cleanup_free char *script = rts_xasprintf("echo $$ > '%s'; exec sleep 30", pidfile);
	char *const argv[] = {"/bin/sh", "-c", script, NULL};
	struct rts_spawn s = piped(argv);
	/* Long enough for the shell to have written its pid on a busy machine. */
	struct rts_cancel c = within(1000);
	struct rts_spawn_result r;
	uint64_t t0 = rts_now_ms();
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -ETIMEDOUT);
	ck_assert_uint_ge(rts_now_ms() - t0, 1000);
	ck_assert(!r.exited);
	ck_assert_int_eq(r.status, SIGKILL);
	rts_spawn_result_release(&r);
	/* Reaped: no zombie of ours is left. */
	pid_t pid = read_pid(pidfile);
	ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), -1);
	ck_assert_int_eq(errno, ECHILD);
}
END_TEST

START_TEST(test_sigterm_first_then_sigkill)
{
	struct rts_spawn_result r;
	/* A child that obeys SIGTERM ends by it, before the grace period is over. */
	char *const obeys[] = {"/bin/sleep", "30", NULL};
	struct rts_spawn s = piped(obeys);
	struct rts_cancel c = within(200);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 5000, &r), -ETIMEDOUT);
	ck_assert(!r.exited);
	ck_assert_int_eq(r.status, SIGTERM);
	rts_spawn_result_release(&r);

	/* One that ignores it gets SIGKILL once the grace period is over. */
	char *const deaf[] = {"/bin/sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30", NULL};
	s = piped(deaf);
	s.new_session = true;
	s.kill_group = true;
	/* Long enough for the shell to have set its trap on a busy machine. */
	c = within(1000);
	uint64_t t0 = rts_now_ms();
	ck_assert_int_eq(rts_spawn_run(&s, &c, 700, &r), -ETIMEDOUT);
	ck_assert_uint_ge(rts_now_ms() - t0, 1000 + 700);
	ck_assert(!r.exited);
	ck_assert_int_eq(r.status, SIGKILL);
	rts_spawn_result_release(&r);
}
END_TEST

/* What a script leaves running in its process group does not outlive the run: neither
 * when it is stopped nor when it exits by itself. */
START_TEST(test_process_group_is_killed)
{
	cleanup_free char *pidfile = rts_xasprintf("%s/bg", tmpdir);
	cleanup_free char *script = rts_xasprintf("sleep 30 >/dev/null 2>&1 & echo $! > '%s'; wait", pidfile);
	char *const argv[] = {"/bin/sh", "-c", script, NULL};
	struct rts_spawn s = piped(argv);
	s.new_session = true;
	s.kill_group = true;
	struct rts_cancel c = within(1000);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 1000, &r), -ETIMEDOUT);
	rts_spawn_result_release(&r);
	ck_assert_msg(process_gone(read_pid(pidfile)), "the stopped child's background process lives on");

	unlink(pidfile);
	cleanup_free char *leave = rts_xasprintf("sleep 30 >/dev/null 2>&1 & echo $! > '%s'", pidfile);
	char *const left[] = {"/bin/sh", "-c", leave, NULL};
	s.argv = left;
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 1000, &r), 0);
	ck_assert(r.exited);
	rts_spawn_result_release(&r);
	ck_assert_msg(process_gone(read_pid(pidfile)), "a background process outlived its leader");

	/* One that keeps writing to a captured pipe ends with its leader too, and the run
	 * does not wait for it. */
	unlink(pidfile);
	cleanup_free char *flood = rts_xasprintf("yes flood >&2 & echo $! > '%s'; sleep 0.2", pidfile);
	char *const flooding[] = {"/bin/sh", "-c", flood, NULL};
	s.argv = flooding;
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 1000, &r), 0);
	ck_assert(r.exited);
	rts_spawn_result_release(&r);
	ck_assert_msg(process_gone(read_pid(pidfile)), "a process writing to the pipes outlived its leader");

	/* Without kill_group (runnerd's docker CLI, which starts nothing of its own) only the
	 * leader is signalled and what it started is left alone. */
	unlink(pidfile);
	s.argv = argv;
	s.kill_group = false;
	c = within(1000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 1000, &r), -ETIMEDOUT);
	rts_spawn_result_release(&r);
	pid_t left_alone = read_pid(pidfile);
	ck_assert_int_eq(kill(left_alone, 0), 0);
	kill(left_alone, SIGKILL);
	/* A group of one's own needs a session of one's own. */
	s.new_session = false;
	s.kill_group = true;
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -EINVAL);
}
END_TEST

static atomic_bool stop_now;

static bool stop_predicate(void *arg)
{
	return atomic_load((atomic_bool *)arg);
}

struct later {
	int fd;	      /* written (eventfd) or closed (socket) after 200 ms, unless -1 */
	bool close_it;
};

static void *act_later(void *arg)
{
	struct later *l = arg;
	struct timespec ts = {.tv_nsec = 200 * 1000 * 1000};
	nanosleep(&ts, NULL);
	atomic_store(&stop_now, true);
	if (l->fd >= 0 && l->close_it) {
		close(l->fd);
	} else if (l->fd >= 0) {
		uint64_t one = 1;
		ck_assert_int_eq(write(l->fd, &one, sizeof(one)), 8);
	}
	return NULL;
}

/* Run sleep 30 with cancel and have `l` act after 200 ms: the run must end cancelled. */
static void expect_cancelled(struct rts_cancel c, struct later *l)
{
	atomic_store(&stop_now, false);
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, act_later, l), 0);
	char *const argv[] = {"/bin/sleep", "30", NULL};
	struct rts_spawn s = piped(argv);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -ECANCELED);
	ck_assert(!r.exited);
	rts_spawn_result_release(&r);
	pthread_join(th, NULL);
}

START_TEST(test_cancellation)
{
	/* The wake descriptor. */
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(efd, 0);
	struct rts_cancel c = within(30000);
	c.wake_fd = efd;
	struct later l = {.fd = efd};
	expect_cancelled(c, &l);
	close(efd);

	/* A hang-up of the caller's connection. */
	int sp[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	c = within(30000);
	c.hangup_fd = sp[0];
	l = (struct later){.fd = sp[1], .close_it = true};
	expect_cancelled(c, &l);
	close(sp[0]);

	/* The predicate alone, asked at least once a second. */
	c = within(30000);
	c.cancelled = stop_predicate;
	c.arg = &stop_now;
	l = (struct later){.fd = -1};
	expect_cancelled(c, &l);

	/* Already cancelled, or past the deadline: nothing is started. */
	atomic_store(&stop_now, true);
	char *const argv[] = {"/bin/true", NULL};
	struct rts_spawn s = piped(argv);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -ECANCELED);
	ck_assert_ptr_null(r.err);
	c = RTS_CANCEL_NONE;
	c.deadline_ms = rts_now_ms() - 1;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -ETIMEDOUT);
	ck_assert_ptr_null(r.err);
}
END_TEST

/* ---- what the child is given ---- */

START_TEST(test_environment_is_exactly_the_given_one)
{
	setenv("RTS_SECRET_FOR_TEST", "do-not-leak", 1);
	char *const argv[] = {"/usr/bin/env", NULL};
	char *const env[] = {"A=1", "B=two words", NULL};
	struct rts_spawn s = piped(argv);
	s.envp = env;
	struct rts_cancel c = within(10000);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert_str_eq(r.out, "A=1\nB=two words\n");
	rts_spawn_result_release(&r);

	s.envp = no_env;
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert_str_eq(r.out, "");
	rts_spawn_result_release(&r);
	unsetenv("RTS_SECRET_FOR_TEST");
}
END_TEST

START_TEST(test_no_descriptor_leaks_into_the_child)
{
	/* Without O_CLOEXEC, as a careless library might leave one. */
	int leak = open("/dev/null", O_RDONLY);
	ck_assert_int_ge(leak, 3);
	int leak2 = dup2(leak, 40);
	ck_assert_int_eq(leak2, 40);
	/* 0, 1 and 2, and 3, which is ls's own handle on the directory it lists. */
	cleanup_free char *fds = sh_output("exec /bin/ls /proc/self/fd");
	close(leak);
	close(leak2);
	ck_assert_str_eq(fds, "0\n1\n2\n3\n");
}
END_TEST

START_TEST(test_cwd_session_and_signals)
{
	char *const argv[] = {"/bin/sh", "-c", "pwd; set -- $(cat /proc/$$/stat); [ \"$6\" = \"$$\" ] && echo leader;"
					       "exec sed -n 's/^Sig\\(Blk\\|Ign\\):\t//p' /proc/self/status",
			      NULL};
	/* Signals we block or ignore ourselves must not reach the child that way. (Read by the
	 * program the shell execs: the shell itself blocks signals while it waits for one.) */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, &block, &old), 0);
	signal(SIGINT, SIG_IGN);

	struct rts_spawn s = piped(argv);
	s.cwd = "/";
	s.new_session = true;
	struct rts_cancel c = within(10000);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	unsigned long long blocked = 1, ignored = 1;
	ck_assert_int_eq(sscanf(r.out, "/\nleader\n%llx\n%llx\n", &blocked, &ignored), 2);
	ck_assert_uint_eq(blocked, 0);
	/* Signals 1 to 31; glibc's posix_spawn leaves its two internal real-time signals
	 * (32, 33) ignored, whatever the attributes say. */
	ck_assert_uint_eq(ignored & 0x7fffffffull, 0);
	rts_spawn_result_release(&r);

	/* Without new_session it stays in ours. */
	s.new_session = false;
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert(strstr(r.out, "leader") == NULL);
	rts_spawn_result_release(&r);
	signal(SIGINT, SIG_DFL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
END_TEST

/* ---- how it ended ---- */

START_TEST(test_exit_status_and_signal)
{
	struct rts_spawn_result r;
	char *const fail[] = {"/bin/sh", "-c", "echo out; echo why >&2; exit 3", NULL};
	struct rts_spawn s = piped(fail);
	struct rts_cancel c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert(r.exited);
	ck_assert_int_eq(r.status, 3);
	ck_assert_str_eq(r.out, "out\n");
	ck_assert_str_eq(r.err, "why\n");
	rts_spawn_result_release(&r);

	char *const killed[] = {"/bin/sh", "-c", "kill -USR1 $$", NULL};
	s.argv = killed;
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert(!r.exited);
	ck_assert_int_eq(r.status, SIGUSR1);
	rts_spawn_result_release(&r);

	/* Not started: the exec error itself, and nothing to release. */
	char *const missing[] = {"/nonexistent/program", NULL};
	s.argv = missing;
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -ENOENT);
	ck_assert_ptr_null(r.out);
	ck_assert_ptr_null(r.err);
	char *const relative[] = {"sh", "-c", "true", NULL};
	s.argv = relative;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -EINVAL);
	s.argv = fail;
	s.envp = NULL;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -EINVAL);
}
END_TEST

START_TEST(test_first_line)
{
	char out[16];
	rts_spawn_first_line("error: no\r\nmore", 15, out, sizeof(out));
	ck_assert_str_eq(out, "error: no");
	rts_spawn_first_line("a\x1b[2Jb\x7f\xc3\xa4\n", 10, out, sizeof(out));
	ck_assert_str_eq(out, "a?[2Jb???");
	rts_spawn_first_line("0123456789abcdefghij", 20, out, sizeof(out));
	ck_assert_str_eq(out, "0123456789abcde");
	rts_spawn_first_line("", 0, out, sizeof(out));
	ck_assert_str_eq(out, "");
	/* The length is what counts, not a NUL. */
	rts_spawn_first_line("ab\0cd", 5, out, sizeof(out));
	ck_assert_str_eq(out, "ab?cd");
}
END_TEST

/* ---- under the daemons' filters ---- */

/* In a forked child under profile: a run with piped stdin, stdout and stderr in a session
 * of its own, then one stopped at its deadline with SIGTERM and SIGKILL. Exit 0 when both
 * did what they should. */
static int run_confined(enum rts_sandbox_profile profile)
{
	if (rts_sandbox_init() < 0 || rts_sandbox_apply(profile) < 0)
		return 10;
	/* Shell built-ins only: runnerd's filter is made for the docker CLI, not for cat. */
	char *const argv[] = {"/bin/sh", "-c", "read -r line; echo \"$line\"; echo err >&2", NULL};
	struct rts_spawn s = piped(argv);
	s.in = RTS_STDIO_PIPE;
	s.input = "in\n";
	s.input_len = 3;
	s.new_session = true;
	s.kill_group = true;
	s.cwd = "/";
	struct rts_cancel c = within(10000);
	struct rts_spawn_result r;
	if (rts_spawn_run(&s, &c, 0, &r) != 0 || !r.exited || r.status != 0 || strcmp(r.out, "in\n") != 0 ||
	    strcmp(r.err, "err\n") != 0)
		return 11;
	rts_spawn_result_release(&r);
	/* stdin from /dev/null (opened for reading), stderr read and dropped entirely. */
	char *const quiet[] = {"/bin/sh", "-c", "echo out; echo err >&2", NULL};
	s = piped(quiet);
	s.err_max = 0;
	c = within(10000);
	if (rts_spawn_run(&s, &c, 0, &r) != 0 || !r.exited || r.status != 0 || strcmp(r.out, "out\n") != 0 ||
	    strcmp(r.err, "") != 0)
		return 12;
	rts_spawn_result_release(&r);
	char *const sleeper[] = {"/bin/sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30", NULL};
	s = piped(sleeper);
	s.new_session = true;
	s.kill_group = true;
	c = within(1000); /* time to set the trap */
	if (rts_spawn_run(&s, &c, 100, &r) != -ETIMEDOUT || r.exited || r.status != SIGKILL)
		return 13;
	rts_spawn_result_release(&r);
	return 0;
}

static void check_confined(enum rts_sandbox_profile profile)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(run_confined(profile));
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "confined run ended with status 0x%x", st);
}

/* brokerd's filter allows no program to start (check_sandbox): brokerd's runs go through
 * the start and reap hooks to its launcher, tried under that filter in check_broker_exec. */

/* ---- given descriptors, and children started elsewhere ---- */

/* stdin, stdout and stderr the caller opened, and a descriptor 3; nothing else. */
START_TEST(test_given_descriptors)
{
	int in[2], out[2], extra[2];
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(extra, O_CLOEXEC), 0);
	/* Above 3, as the spawner wants them. */
	int fin = fcntl(in[0], F_DUPFD_CLOEXEC, 10), fout = fcntl(out[1], F_DUPFD_CLOEXEC, 10),
	    f3 = fcntl(extra[1], F_DUPFD_CLOEXEC, 10);
	close(in[0]);
	close(out[1]);
	close(extra[1]);
	ck_assert_int_eq(write(in[1], "hello\n", 6), 6);
	close(in[1]);
	char *const argv[] = {"/bin/sh", "-c", "read -r l; echo \"$l\"; ls /proc/self/fd >&2; echo three >&3", NULL};
	static char *const env[] = {"PATH=/usr/bin:/bin", NULL};
	struct rts_spawn s = {.argv = argv, .envp = env, .in = RTS_STDIO_FD, .out = RTS_STDIO_FD, .err = RTS_STDIO_FD,
			      .fds = {fin, fout, fout}, .with_fd3 = true, .fd3 = f3};
	struct rts_cancel c = within(10000);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert(r.exited && r.status == 0);
	rts_spawn_result_release(&r);
	close(fin);
	close(fout);
	close(f3);
	char buf[256] = "";
	ck_assert_int_gt(read(out[0], buf, sizeof(buf) - 1), 0);
	/* ls's own directory handle is the 4th entry: 0-3 and nothing of ours. */
	ck_assert_str_eq(buf, "hello\n0\n1\n2\n3\n4\n");
	char three[16] = "";
	ck_assert_int_eq(read(extra[0], three, sizeof(three) - 1), 6);
	ck_assert_str_eq(three, "three\n");
	close(out[0]);
	close(extra[0]);
	/* Not above 3: refused before anything starts. */
	s.fds[0] = 3;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -EINVAL);
	s.fds[0] = 10;
	s.fd3 = 2;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -EINVAL);
}
END_TEST

/* A starter that runs argv itself (as brokerd's launcher does in another process) and a
 * reaper that waits for it; both count their calls. */
struct elsewhere {
	char *const *argv;
	int start_result; /* < 0: fail with it, start nothing */
	pid_t pid;
	int starts, reaps;
};

static int start_elsewhere(void *arg, const int fds[3], int *pidfd)
{
	struct elsewhere *e = arg;
	e->starts++;
	if (e->start_result < 0)
		return e->start_result;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	for (int i = 0; i < 3; i++)
		posix_spawn_file_actions_adddup2(&fa, fds[i], i);
	static char *const env[] = {"PATH=/usr/bin:/bin", NULL};
	int r = posix_spawn(&e->pid, e->argv[0], &fa, NULL, e->argv, env);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return -r;
	*pidfd = (int)syscall(SYS_pidfd_open, e->pid, 0);
	return *pidfd >= 0 ? 0 : -errno;
}

static int reap_elsewhere(void *arg, int *status)
{
	struct elsewhere *e = arg;
	e->reaps++;
	return waitpid(e->pid, status, 0) == e->pid ? 0 : -errno;
}

START_TEST(test_started_elsewhere)
{
	char *const argv[] = {"/bin/sh", "-c", "read -r l; echo \"out $l\"; echo err >&2; exit 4", NULL};
	struct elsewhere e = {.argv = argv};
	struct rts_spawn s = {.start = start_elsewhere, .reap = reap_elsewhere, .hook_arg = &e, .in = RTS_STDIO_PIPE,
			      .input = "x\n", .input_len = 2, .out = RTS_STDIO_PIPE, .out_max = 4096,
			      .err = RTS_STDIO_PIPE, .err_max = 64};
	struct rts_cancel c = within(10000);
	struct rts_spawn_result r;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), 0);
	ck_assert(r.exited);
	ck_assert_int_eq(r.status, 4);
	ck_assert_str_eq(r.out, "out x\n");
	ck_assert_str_eq(r.err, "err\n");
	ck_assert_int_eq(e.starts, 1);
	ck_assert_int_eq(e.reaps, 1);
	rts_spawn_result_release(&r);

	/* Stopped at the deadline through the pidfd, SIGTERM first; reaped by the hook. */
	char *const sleeper[] = {"/bin/sleep", "30", NULL};
	e = (struct elsewhere){.argv = sleeper};
	s.input_len = 0;
	c = within(200);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 1000, &r), -ETIMEDOUT);
	ck_assert(!r.exited);
	ck_assert_int_eq(r.status, SIGTERM);
	ck_assert_int_eq(e.reaps, 1);
	rts_spawn_result_release(&r);

	/* The starter's failure is the run's; nothing to reap. */
	e = (struct elsewhere){.argv = argv, .start_result = -ENOENT};
	c = within(10000);
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -ENOENT);
	ck_assert_int_eq(e.starts, 1);
	ck_assert_int_eq(e.reaps, 0);

	/* Only pipes can be handed over, and no process group is signalled. */
	e = (struct elsewhere){.argv = argv};
	s.err = RTS_STDIO_NULL;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -EINVAL);
	s.err = RTS_STDIO_PIPE;
	s.new_session = s.kill_group = true;
	ck_assert_int_eq(rts_spawn_run(&s, &c, 0, &r), -EINVAL);
	ck_assert_int_eq(e.starts, 0);
}
END_TEST

START_TEST(test_under_runnerd_filter)
{
	check_confined(RTS_SANDBOX_RUNNERD);
}
END_TEST

int main(void)
{
	/* As in the daemons: a child that stops reading its stdin must not kill us. */
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("spawn");
	TCase *tc = tcase_create("output");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_stdout_exactly_at_the_bound);
	tcase_add_test(tc, test_endless_stdout_is_stopped);
	tcase_add_test(tc, test_stderr_keeps_its_head_and_never_blocks);
	tcase_add_test(tc, test_stdin_larger_than_a_pipe);
	suite_add_tcase(s, tc);
	tc = tcase_create("stopping");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_deadline_kills_and_reaps);
	tcase_add_test(tc, test_sigterm_first_then_sigkill);
	tcase_add_test(tc, test_process_group_is_killed);
	tcase_add_test(tc, test_cancellation);
	suite_add_tcase(s, tc);
	tc = tcase_create("child");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_environment_is_exactly_the_given_one);
	tcase_add_test(tc, test_no_descriptor_leaks_into_the_child);
	tcase_add_test(tc, test_cwd_session_and_signals);
	tcase_add_test(tc, test_exit_status_and_signal);
	tcase_add_test(tc, test_first_line);
	tcase_add_test(tc, test_given_descriptors);
	tcase_add_test(tc, test_started_elsewhere);
	suite_add_tcase(s, tc);
	tc = tcase_create("seccomp");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_under_runnerd_filter);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
