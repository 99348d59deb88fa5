/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox-worker: the sealed turn inside the container.
 *
 * stdin: one JSON object (HACKING.md "Worker input"). stdout: exactly one JSON object and
 * nothing else, ever: {"v":1,"reply":TEXT} or, when the turn could not be completed,
 * {"v":1,"error":CODE}; both exit 0 so that runnerd reads the code. Bad input (including
 * bad options) exits 1 with {"v":1,"error":"bad_input"}; failing to write stdout exits 2.
 * Diagnostics go to stderr, short and without payloads. */
#include "config.h"

#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>

#include "common/json.h"
#include "common/util.h"
#include "worker/agent.h"
#include "worker/input.h"
#include "worker/worker.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: roundtable-sandbox-worker [--broker SOCKET] [--workspace DIR]\n"
		   "Runs one sandboxed turn: the turn as JSON on stdin, the reply as JSON on stdout.\n"
		   "  --broker SOCKET   broker socket (default " WORKER_DEFAULT_BROKER ")\n"
		   "  --workspace DIR   channel workspace (default " WORKER_DEFAULT_WORKSPACE ")\n");
}

/* All of stdin up to max bytes, within WORKER_INPUT_TIMEOUT_MS of its first byte: runnerd
 * writes the input and closes stdin at once, so a stdin that stays open once input began
 * is a host bug, not a reason to hang. Before the first byte there is no deadline: a warm
 * spare's worker (runnerd/spare.h) waits here for as long as runnerd keeps the spare
 * (warmSpareIdleMs at most), and a cold turn's container is bounded by runnerd's turn
 * deadline. Returns the length, or -EFBIG, -ETIMEDOUT, or the read error. */
static ssize_t read_input(char *buf, size_t max)
{
	size_t len = 0;
	uint64_t deadline = 0; /* 0: no byte yet */
	for (;;) {
		uint64_t now = rts_now_ms();
		if (deadline && now >= deadline)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		int r = poll(&pfd, 1, deadline ? (int)(deadline - now) : -1);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		ssize_t n = read(STDIN_FILENO, buf + len, max + 1 - len);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0)
			return (ssize_t)len;
		if (!deadline)
			deadline = rts_now_ms() + WORKER_INPUT_TIMEOUT_MS;
		len += (size_t)n;
		if (len > max)
			return -EFBIG;
	}
}

static int emit(int fd, const char *key, const char *value)
{
	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "v", json_object_new_int(1));
	json_object_object_add(o, key, json_object_new_string(value));
	cleanup_free char *text = rts_xasprintf("%s\n", json_object_to_json_string_ext(
								 o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	return rts_write_all(fd, text, strlen(text));
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"broker", required_argument, NULL, 'b'},
		{"workspace", required_argument, NULL, 'w'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *broker = WORKER_DEFAULT_BROKER;
	const char *workspace = WORKER_DEFAULT_WORKSPACE;
	int c;

	/* Every turn container runs as the same guest uid. Non-dumpable, this process (the
	 * container's only one) cannot be ptraced by another process of that uid, and its
	 * /proc/PID/root, cwd and fd belong to root: a guest that escaped from another turn's
	 * container cannot reach this turn's broker socket or workspace through them
	 * (roundtable-sandbox(7) "Accounts"). Docker's default seccomp profile allows it. The
	 * image ships this binary execute-only (worker/Makemodule.am), so the kernel has made
	 * the process non-dumpable at exec already; this call keeps it so where an image was
	 * built from a readable copy. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fprintf(stderr, "worker: cannot become non-dumpable: %s\n", strerror(errno));

	signal(SIGPIPE, SIG_IGN);
	/* Keep the real stdout for the one answer and point fd 1 at stderr, so no stray
	 * write anywhere can add a second object. */
	int out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	if (out < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
		fprintf(stderr, "worker: cannot set up stdout: %m\n");
		return 2;
	}

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 'b':
			broker = optarg;
			break;
		case 'w':
			workspace = optarg;
			break;
		case 'h':
			usage(stderr);
			return 0;
		default:
			usage(stderr);
			emit(out, "error", "bad_input");
			return 1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		emit(out, "error", "bad_input");
		return 1;
	}

	cleanup_free char *buf = rts_xmalloc(RTS_WORKER_INPUT_MAX + 1);
	ssize_t len = read_input(buf, RTS_WORKER_INPUT_MAX);
	struct worker_input *in = NULL;
	char why[256];
	if (len < 0) {
		fprintf(stderr, "worker: reading the input failed: %s\n", strerror((int)-len));
	} else if (worker_input_parse(buf, (size_t)len, &in, why, sizeof(why)) < 0) {
		fprintf(stderr, "worker: bad input: %s\n", why);
	}
	if (!in) {
		emit(out, "error", "bad_input");
		return 1;
	}

	cleanup_free char *reply = NULL;
	const char *code = NULL;
	int r = worker_agent_run(in, broker, workspace, &reply, &code);
	worker_input_free(in);
	r = r == 0 ? emit(out, "reply", reply) : emit(out, "error", code);
	if (r < 0) {
		fprintf(stderr, "worker: writing the answer failed: %s\n", strerror(-r));
		return 2;
	}
	return 0;
}
