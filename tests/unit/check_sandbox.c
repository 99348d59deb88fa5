/* SPDX-License-Identifier: Apache-2.0 */
/* common/sandbox.c: each profile's filter, tried in a forked child (a filter cannot be
 * removed again). The child reports the line of the first failed expectation through a
 * pipe; the parent checks that and how the child ended (a kill by SIGSYS where the default
 * action must strike). */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/sandbox.h"
#include "common/util.h"

extern char **environ;

static int report_fd = -1;
static char scratch[] = "/tmp/rts-check-sandbox-XXXXXX";

/* In the child: note the failing line and stop. */
#define EXPECT(cond)                                                              \
	do {                                                                      \
		if (!(cond)) {                                                    \
			int _line = __LINE__;                                     \
			(void)!write(report_fd, &_line, sizeof(_line));           \
			return 1;                                                 \
		}                                                                 \
	} while (0)

/* errno of a call that must fail, or 0 when it succeeded (the fd is closed). */
static int fails_with(int r)
{
	if (r >= 0) {
		close(r);
		return 0;
	}
	return errno;
}

/* Run fn in a child under profile. Returns its wait status; *line is the failed EXPECT's
 * line or 0. */
static int run_confined(enum rts_sandbox_profile p, int (*fn)(void), int *line)
{
	int pfd[2];
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(pfd[0]);
		report_fd = pfd[1];
		if (rts_sandbox_init() < 0 || rts_sandbox_apply(p) < 0)
			_exit(100);
		_exit(fn());
	}
	close(pfd[1]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	*line = 0;
	if (read(pfd[0], line, sizeof(*line)) != sizeof(*line))
		*line = 0;
	close(pfd[0]);
	return st;
}

static void assert_clean_exit(int st, int line)
{
	ck_assert_msg(line == 0, "expectation at line %d failed in the confined child", line);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child ended with status 0x%x", st);
}

static void assert_killed_by_sigsys(int st, int line)
{
	ck_assert_msg(line == 0, "expectation at line %d failed in the confined child", line);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "child ended with status 0x%x, not SIGSYS", st);
}

/* Run argv with stderr closed (a refused write would only print noise). */
static int spawn_status(char *const argv[])
{
	pid_t pid;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addclose(&fa, STDERR_FILENO);
	int r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return -1;
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return st;
}

/* ---- brokerd: reads, never writes ---- */

static int brokerd_file_system(void)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/existing", scratch);
	EXPECT(fails_with(open(path, O_RDONLY | O_CLOEXEC)) == 0);
	EXPECT(fails_with(open(path, O_WRONLY | O_CLOEXEC)) == EACCES);
	EXPECT(fails_with(open(path, O_RDWR | O_CLOEXEC)) == EACCES);
	EXPECT(fails_with(open(path, O_RDONLY | O_TRUNC | O_CLOEXEC)) == EACCES);
	EXPECT(fails_with(open(path, O_WRONLY | O_APPEND | O_CLOEXEC)) == EACCES);
	EXPECT(fails_with(openat(AT_FDCWD, scratch, O_TMPFILE | O_RDWR, 0600)) == EACCES);
	EXPECT(fails_with(creat(path, 0600)) == EACCES);
	EXPECT(fails_with(open("/dev/null", O_WRONLY | O_CLOEXEC)) == EACCES);
	snprintf(path, sizeof(path), "%s/new", scratch);
	EXPECT(fails_with(open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0600)) == EACCES);
	EXPECT(mkdir(path, 0700) < 0 && errno == EACCES);
	EXPECT(symlink("existing", path) < 0 && errno == EACCES);
	snprintf(path, sizeof(path), "%s/existing", scratch);
	EXPECT(unlink(path) < 0 && errno == EACCES);
	EXPECT(chmod(path, 0644) < 0 && errno == EACCES);
	EXPECT(truncate(path, 0) < 0 && errno == EACCES);
	/* openat2 hides its flags from the filter: refused as if the kernel lacked it. */
	EXPECT(syscall(SYS_openat2, AT_FDCWD, path, NULL, 0) < 0 && errno == ENOSYS);
	/* Binding an AF_UNIX socket would create a file. */
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	EXPECT(s >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", scratch);
	EXPECT(bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == EACCES);
	close(s);
	return 0;
}

START_TEST(test_brokerd_never_writes)
{
	int line;
	int st = run_confined(RTS_SANDBOX_BROKERD, brokerd_file_system, &line);
	assert_clean_exit(st, line);
	/* And nothing changed. */
	char path[256];
	struct stat sb;
	snprintf(path, sizeof(path), "%s/existing", scratch);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_size, 5);
	snprintf(path, sizeof(path), "%s/new", scratch);
	ck_assert_int_ne(lstat(path, &sb), 0);
	snprintf(path, sizeof(path), "%s/sock", scratch);
	ck_assert_int_ne(lstat(path, &sb), 0);
}
END_TEST

static int brokerd_network_and_children(void)
{
	EXPECT(fails_with(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == 0);
	EXPECT(fails_with(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == 0);
	EXPECT(fails_with(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) == 0);
	EXPECT(fails_with(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT)) == EAFNOSUPPORT);
	EXPECT(fails_with(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0)) == EAFNOSUPPORT);
	EXPECT(fails_with(socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0)) == EAFNOSUPPORT);
	/* clone3 is refused so that glibc falls back to clone, whose flags are checked. */
	EXPECT(syscall(SYS_clone3, NULL, 0) < 0 && errno == ENOSYS);
	/* brokerd executes nothing (its launcher starts host commands): a child it forks dies
	 * at its execve, so nothing the child would do happens. */
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "echo x > %s/from-sh", scratch);
	char *sh_write[] = {"/bin/sh", "-c", cmd, NULL};
	int st = spawn_status(sh_write);
	EXPECT(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	/* No memory writable and executable at once, none made executable later; code
	 * mapped executable from the start (how the loader maps libraries) is fine. */
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	EXPECT(mmap(NULL, pg, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED &&
	       errno == EPERM);
	void *rw = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT(rw != MAP_FAILED);
	EXPECT(mprotect(rw, pg, PROT_READ | PROT_EXEC) < 0 && errno == EPERM);
	EXPECT(mprotect(rw, pg, PROT_READ) == 0);
	void *rx = mmap(NULL, pg, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT(rx != MAP_FAILED);
	return 0;
}

START_TEST(test_brokerd_network_and_children)
{
	int line;
	{
		int st = run_confined(RTS_SANDBOX_BROKERD, brokerd_network_and_children, &line);
		assert_clean_exit(st, line);
	}
	char path[256];
	struct stat sb;
	snprintf(path, sizeof(path), "%s/from-sh", scratch);
	ck_assert_int_ne(lstat(path, &sb), 0);
}
END_TEST

static int new_user_namespace(void)
{
	/* fork()'s clone with a namespace flag: the default action. */
	syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L, 0L);
	return 0;
}

START_TEST(test_no_namespaces)
{
	int line;
	{
		int st = run_confined(RTS_SANDBOX_BROKERD, new_user_namespace, &line);
		assert_killed_by_sigsys(st, line);
	}
	{
		int st = run_confined(RTS_SANDBOX_RUNNERD, new_user_namespace, &line);
		assert_killed_by_sigsys(st, line);
	}
}
END_TEST

static int call_mount(void)
{
	mount("none", "/", "tmpfs", 0, NULL);
	return 0;
}

START_TEST(test_unlisted_call_kills)
{
	int line;
	{
		int st = run_confined(RTS_SANDBOX_BROKERD, call_mount, &line);
		assert_killed_by_sigsys(st, line);
	}
	{
		int st = run_confined(RTS_SANDBOX_RUNNERD, call_mount, &line);
		assert_killed_by_sigsys(st, line);
	}
	{
		int st = run_confined(RTS_SANDBOX_STATD, call_mount, &line);
		assert_killed_by_sigsys(st, line);
	}
}
END_TEST

START_TEST(test_log_switch_logs_instead_of_killing)
{
	int line;
	setenv(RTS_SANDBOX_LOG_ENV, "1", 1);
	int st = run_confined(RTS_SANDBOX_STATD, call_mount, &line);
	unsetenv(RTS_SANDBOX_LOG_ENV);
	assert_clean_exit(st, line);
	/* Anything but "1" keeps the default. */
	setenv(RTS_SANDBOX_LOG_ENV, "yes", 1);
	st = run_confined(RTS_SANDBOX_STATD, call_mount, &line);
	unsetenv(RTS_SANDBOX_LOG_ENV);
	assert_killed_by_sigsys(st, line);
}
END_TEST

/* ---- statd: its own files, local sockets, no children ---- */

static int statd_calls(void)
{
	char path[256], tmp[256];
	snprintf(path, sizeof(path), "%s/state.json", scratch);
	snprintf(tmp, sizeof(tmp), "%s/.state.json.tmp", scratch);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	EXPECT(fd >= 0);
	EXPECT(write(fd, "{}\n", 3) == 3 && fsync(fd) == 0 && close(fd) == 0);
	EXPECT(rename(tmp, path) == 0);
	EXPECT(fails_with(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == 0);
	/* No network at all. */
	EXPECT(fails_with(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == EAFNOSUPPORT);
	EXPECT(fails_with(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0)) == EAFNOSUPPORT);
	EXPECT(fails_with(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) == EAFNOSUPPORT);
	return 0;
}

START_TEST(test_statd_files_and_local_sockets)
{
	int line;
	{
		int st = run_confined(RTS_SANDBOX_STATD, statd_calls, &line);
		assert_clean_exit(st, line);
	}
}
END_TEST

static int statd_exec(void)
{
	/* statd runs no program: execve is the default action. */
	char *argv[] = {"/bin/true", NULL};
	execve(argv[0], argv, environ);
	return 0;
}

static __attribute__((unused)) int statd_fork(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	return 0;
}

START_TEST(test_statd_has_no_children)
{
	int line;
	int st = run_confined(RTS_SANDBOX_STATD, statd_exec, &line);
	assert_killed_by_sigsys(st, line);
#ifndef RTS_SANITIZER_BUILD /* LeakSanitizer needs clone at exit: sandbox.c allows it there */
	st = run_confined(RTS_SANDBOX_STATD, statd_fork, &line);
	assert_killed_by_sigsys(st, line);
#endif
}
END_TEST

/* ---- runnerd: run dirs, sockets, the docker CLI ---- */

static int runnerd_calls(void)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/turn", scratch);
	EXPECT(mkdir(path, 0700) == 0);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	EXPECT(s >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/broker.sock", path);
	EXPECT(bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(s, 4) == 0);
	close(s);
	EXPECT(unlink(sa.sun_path) == 0 && rmdir(path) == 0);
	EXPECT(fails_with(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == EAFNOSUPPORT);
	char *t[] = {"/bin/true", NULL};
	int st = spawn_status(t);
	EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return 0;
}

START_TEST(test_runnerd_run_dirs_and_children)
{
	int line;
	{
		int st = run_confined(RTS_SANDBOX_RUNNERD, runnerd_calls, &line);
		assert_clean_exit(st, line);
	}
}
END_TEST

START_TEST(test_unknown_profile)
{
	ck_assert_int_eq(rts_sandbox_apply((enum rts_sandbox_profile)42), -EINVAL);
}
END_TEST

static void setup(void)
{
	strcpy(scratch, "/tmp/rts-check-sandbox-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(scratch));
	char path[256];
	snprintf(path, sizeof(path), "%s/existing", scratch);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("keep\n", f);
	fclose(f);
}

static void teardown(void)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
	ck_assert_int_eq(system(cmd), 0);
}

int main(void)
{
	Suite *s = suite_create("sandbox");
	TCase *tc = tcase_create("filters");
	/* Unchecked: setup and teardown run once in the parent; a checked teardown would run in
	 * the test child after the filter is installed and fail to remove the scratch dir. */
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_brokerd_never_writes);
	tcase_add_test(tc, test_brokerd_network_and_children);
	tcase_add_test(tc, test_no_namespaces);
	tcase_add_test(tc, test_unlisted_call_kills);
	tcase_add_test(tc, test_log_switch_logs_instead_of_killing);
	tcase_add_test(tc, test_statd_files_and_local_sockets);
	tcase_add_test(tc, test_statd_has_no_children);
	tcase_add_test(tc, test_runnerd_run_dirs_and_children);
	tcase_add_test(tc, test_unknown_profile);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
