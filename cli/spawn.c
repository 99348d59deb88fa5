/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cli/spawn.h"
#include "common/util.h"

/* Kill and reap a child we have not reaped yet (its pid cannot have been reused). */
static void spawn_kill(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

static int spawn_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return -ECHILD;
}

int cli_spawn(char *const argv[], char **out, size_t max_out, unsigned timeout_ms)
{
	int pipefd[2] = {-1, -1};
	if (out) {
		*out = NULL;
		if (pipe2(pipefd, O_CLOEXEC) < 0)
			return -errno;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int r = -errno;
		if (out) {
			close(pipefd[0]);
			close(pipefd[1]);
		}
		return r;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0)
			_exit(127);
		if (out && dup2(pipefd[1], STDOUT_FILENO) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	cleanup_close int rd = pipefd[0];
	if (out)
		close(pipefd[1]);
	/* A pidfd lets one poll() wait for both the output and the exit, with a deadline. */
	cleanup_close int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		int r = -errno;
		spawn_kill(pid);
		return r;
	}
	cleanup_free char *buf = out ? rts_xmalloc(max_out + 1) : NULL;
	size_t len = 0;
	uint64_t deadline = timeout_ms ? rts_now_ms() + timeout_ms : 0;
	bool reaped = false;
	int st = 0;
	while (!reaped || rd >= 0) {
		struct pollfd p[2];
		nfds_t n = 0;
		if (!reaped)
			p[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
		if (rd >= 0)
			p[n++] = (struct pollfd){.fd = rd, .events = POLLIN};
		int wait_ms = -1;
		if (deadline) {
			uint64_t now = rts_now_ms();
			wait_ms = now >= deadline ? 0 : (int)(deadline - now);
		}
		int k = poll(p, n, wait_ms);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			int r = -errno;
			if (!reaped)
				spawn_kill(pid);
			return r;
		}
		if (k == 0) {
			if (!reaped)
				spawn_kill(pid);
			return -ETIMEDOUT;
		}
		for (nfds_t i = 0; i < n; i++) {
			if (!p[i].revents)
				continue;
			if (p[i].fd == pidfd) {
				while (waitpid(pid, &st, 0) < 0) {
					if (errno != EINTR)
						return -errno;
				}
				reaped = true;
				continue;
			}
			ssize_t got = read(rd, buf + len, max_out + 1 - len);
			if (got < 0) {
				if (errno == EINTR)
					continue;
				int r = -errno;
				if (!reaped)
					spawn_kill(pid);
				return r;
			}
			if (got == 0) {
				close(rd);
				rd = -1;
				continue;
			}
			len += (size_t)got;
			if (len > max_out) {
				if (!reaped)
					spawn_kill(pid);
				return -EFBIG;
			}
		}
	}
	if (out) {
		buf[len] = '\0';
		*out = steal_pointer(&buf);
	}
	return spawn_status(st);
}
