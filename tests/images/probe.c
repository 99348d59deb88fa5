/* SPDX-License-Identifier: Apache-2.0 */
/* Test-only stand-in for the worker: run in a turn container, it reports what the container
 * really gets (identity, capabilities, filesystem, network, limits, the broker socket and the
 * worker input it was handed) as the reply text, so integration tests can assert isolation
 * from the inside. Never installed. Static, for a FROM scratch image.
 *
 * Modes, chosen by the guest text in the worker input:
 *   "#hang"  ignore SIGTERM and sleep forever (a hostile PID 1 for deadline tests)
 *   "#fail"  write nothing and exit with status 3 (a worker that crashed)
 *   other    write the report and exit
 *
 * The report's "exec_workspace" says whether a program copied into /workspace runs there
 * (seed: the workspace remains executable): "ok" when a copy of this binary, started from
 * /workspace with a fresh token, printed that token back. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

static char input[1 << 20];
static char report[1 << 17];
static size_t rlen;

/* Append a JSON string value to report, escaping as needed (truncated when full). */
static void put_json_string(const char *s, size_t n)
{
	report[rlen++] = '"';
	for (size_t i = 0; i < n && rlen < sizeof(report) - 16; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			report[rlen++] = '\\';
			report[rlen++] = (char)c;
		} else if (c < 0x20 || c >= 0x7f) {
			rlen += (size_t)snprintf(report + rlen, sizeof(report) - rlen, "\\u%04x", c);
		} else {
			report[rlen++] = (char)c;
		}
	}
	report[rlen++] = '"';
}

static void put_field(const char *name, const char *value, size_t n)
{
	if (rlen > 1)
		report[rlen++] = ',';
	put_json_string(name, strlen(name));
	report[rlen++] = ':';
	put_json_string(value, n);
}

static void put_file(const char *name, const char *path)
{
	char buf[8192];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		char err[64];
		snprintf(err, sizeof(err), "ERR %d", errno);
		put_field(name, err, strlen(err));
		return;
	}
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	put_field(name, buf, n > 0 ? (size_t)n : 0);
}

static void put_result(const char *name, int ok, int err)
{
	char buf[32];
	if (ok)
		snprintf(buf, sizeof(buf), "ok");
	else
		snprintf(buf, sizeof(buf), "ERR %d", err);
	put_field(name, buf, strlen(buf));
}

#define EXEC_COPY "/workspace/.probe-exec"

/* Copy this binary to EXEC_COPY, run it from there with a token and check that the token
 * comes back. Writes "ok" or what failed into out. */
static void exec_from_workspace(char *out, size_t outlen)
{
	char buf[65536];
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int fd = open(EXEC_COPY, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
	if (in < 0 || fd < 0) {
		snprintf(out, outlen, "ERR copy %d", errno);
		goto done;
	}
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n) {
			snprintf(out, outlen, "ERR write %d", errno);
			goto done;
		}
	/* A writer still open would make the exec fail with ETXTBSY. */
	close(fd);
	fd = -1;

	char token[32];
	snprintf(token, sizeof(token), "%ld-%ld", (long)getpid(), (long)time(NULL));
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(out, outlen, "ERR pipe %d", errno);
		goto done;
	}
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], STDOUT_FILENO);
		char *const argv[] = {EXEC_COPY, "--echo", token, NULL};
		char *const envp[] = {NULL};
		execve(EXEC_COPY, argv, envp);
		dprintf(STDOUT_FILENO, "ERR exec %d", errno);
		_exit(127);
	}
	close(p[1]);
	char got[128] = "";
	size_t len = 0;
	while (len < sizeof(got) - 1 && (n = read(p[0], got + len, sizeof(got) - 1 - len)) > 0)
		len += (size_t)n;
	got[len] = '\0';
	close(p[0]);
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		snprintf(out, outlen, "ERR fork %d", errno);
	else if (strncmp(got, "ERR", 3) == 0)
		snprintf(out, outlen, "%s", got);
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && strncmp(got, "ran ", 4) == 0 &&
		 strcmp(got + 4, token) == 0)
		snprintf(out, outlen, "ok");
	else
		snprintf(out, outlen, "ERR no token (status %d)", status);
done:
	if (in >= 0)
		close(in);
	if (fd >= 0)
		close(fd);
	unlink(EXEC_COPY);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--echo") == 0) {
		printf("ran %s", argv[2]);
		return 0;
	}
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(input) - 1 && (n = read(0, input + len, sizeof(input) - 1 - len)) > 0)
		len += (size_t)n;
	input[len] = '\0';

	if (strstr(input, "#fail"))
		return 3;
	if (strstr(input, "#hang")) {
		signal(SIGTERM, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		for (;;)
			pause();
	}

	report[rlen++] = '{';
	put_field("input", input, len);
	put_file("status", "/proc/self/status");
	put_file("netdev", "/proc/net/dev");
	put_file("mountinfo", "/proc/self/mountinfo");
	put_file("environ", "/proc/self/environ");
	put_file("cgroup_memory", "/sys/fs/cgroup/memory/memory.limit_in_bytes");
	put_file("cgroup_memsw", "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes");
	put_file("cgroup_pids", "/sys/fs/cgroup/pids/pids.max");
	put_file("cgroup_cpu_quota", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
	put_file("cgroup_v2_memory", "/sys/fs/cgroup/memory.max");
	put_file("cgroup_v2_pids", "/sys/fs/cgroup/pids.max");

	int fd = open("/probe-write-test", O_WRONLY | O_CREAT | O_EXCL, 0600);
	put_result("write_root", fd >= 0, errno);
	fd = open("/workspace/.probe-write-test", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	put_result("write_workspace", fd >= 0, errno);
	if (fd >= 0) {
		close(fd);
		unlink("/workspace/.probe-write-test");
	}
	fd = open("/run/broker/probe-write-test", O_WRONLY | O_CREAT | O_EXCL, 0600);
	put_result("write_broker_dir", fd >= 0, errno);
	char ran[128];
	exec_from_workspace(ran, sizeof(ran));
	put_field("exec_workspace", ran, strlen(ran));

	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(443)};
	inet_pton(AF_INET, "1.1.1.1", &sin.sin_addr);
	int r = s >= 0 ? connect(s, (struct sockaddr *)&sin, sizeof(sin)) : -1;
	put_result("connect_internet", r == 0, errno);

	s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	strcpy(sun.sun_path, "/run/broker/broker.sock");
	r = connect(s, (struct sockaddr *)&sun, sizeof(sun));
	put_result("connect_broker", r == 0, errno);
	report[rlen++] = '}';

	/* The reply is the report, itself a JSON document, as a string. */
	printf("{\"v\":1,\"reply\":");
	char *doc = strndup(report, rlen);
	rlen = 0;
	put_json_string(doc, strlen(doc));
	fwrite(report, 1, rlen, stdout);
	printf("}\n");
	return 0;
}
