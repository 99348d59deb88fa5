/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <json.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "common/fetch_seams.h"
#include "common/util.h"
#include "tests/unit/fetch_rig.h"

#define RIG_PYTHON "/usr/bin/python3"
#define RIG_NAMES_MAX 32
#define RIG_ANSWERS_MAX 4
#define RIG_DIALS_MAX 64

struct rig_ports rig_ports;

static char dir[64];
static pid_t fake_pid = -1;
static char ca_path[128], record_path[128];

static struct {
	char name[256];
	char answers[RIG_ANSWERS_MAX][512];
	unsigned n_answers;
	unsigned lookups;
} names[RIG_NAMES_MAX];
static size_t n_names;

static struct {
	char addr[INET6_ADDRSTRLEN];
	unsigned port;
} dials[RIG_DIALS_MAX];
static size_t n_dials;
static const char *dial_log_path;

static void die(const char *what)
{
	fprintf(stderr, "fetch rig: %s\n", what);
	abort();
}

void rig_resolve_clear(void)
{
	memset(names, 0, sizeof(names));
	n_names = 0;
}

void rig_resolve_add(const char *name, const char *addrs)
{
	size_t i = 0;
	while (i < n_names && strcmp(names[i].name, name) != 0)
		i++;
	if (i == n_names) {
		if (n_names == RIG_NAMES_MAX)
			die("too many names");
		snprintf(names[n_names++].name, sizeof(names[0].name), "%s", name);
	}
	if (names[i].n_answers == RIG_ANSWERS_MAX)
		die("too many answers");
	snprintf(names[i].answers[names[i].n_answers++], sizeof(names[0].answers[0]), "%s", addrs);
}

unsigned rig_lookups(const char *name)
{
	for (size_t i = 0; i < n_names; i++)
		if (strcmp(names[i].name, name) == 0)
			return names[i].lookups;
	return 0;
}

bool rig_parse_addr(const char *text, struct rts_netaddr *a)
{
	*a = (struct rts_netaddr){0};
	if (inet_pton(AF_INET, text, &a->v4) == 1)
		a->family = AF_INET;
	else if (inet_pton(AF_INET6, text, &a->v6) == 1)
		a->family = AF_INET6;
	return a->family != 0;
}

static int rig_resolve(void *arg, const char *host, struct rts_netaddr *out, size_t max)
{
	for (size_t i = 0; i < n_names; i++) {
		if (strcmp(names[i].name, host) != 0)
			continue;
		unsigned k = names[i].lookups < names[i].n_answers ? names[i].lookups : names[i].n_answers - 1;
		names[i].lookups++;
		const char *ans = names[i].answers[k];
		if (strcmp(ans, "NXDOMAIN") == 0)
			return -1;
		if (strcmp(ans, "SLOW") == 0) {
			/* a DNS server that does not answer for 10 s */
			poll(NULL, 0, 10000);
			return -1;
		}
		char copy[512];
		snprintf(copy, sizeof(copy), "%s", ans);
		int n = 0;
		char *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t && (size_t)n < max; t = strtok_r(NULL, ",", &save)) {
			if (!rig_parse_addr(t, &out[n]))
				die("bad address in a resolver answer");
			n++;
		}
		return n;
	}
	return -1;
}

static void rig_dial(void *arg, const struct rts_netaddr *vetted, unsigned port, struct sockaddr *sa, socklen_t *len)
{
	char text[INET6_ADDRSTRLEN];
	inet_ntop(vetted->family, vetted->family == AF_INET ? (const void *)&vetted->v4 : (const void *)&vetted->v6, text,
		  sizeof(text));
	if (n_dials < RIG_DIALS_MAX) {
		snprintf(dials[n_dials].addr, sizeof(dials[0].addr), "%s", text);
		dials[n_dials++].port = port;
	}
	if (dial_log_path) {
		FILE *f = fopen(dial_log_path, "a");
		if (f) {
			fprintf(f, "%s %u\n", text, port);
			fclose(f);
		}
	}
	int to;
	if (strcmp(text, RIG_ADDR_BLACKHOLE) == 0)
		to = rig_ports.blackhole4;
	else if (strcmp(text, RIG_ADDR_TLSHANG) == 0)
		to = rig_ports.tlshang4;
	else if (strcmp(text, RIG_ADDR_CLOSED) == 0)
		to = rig_ports.closed4;
	else if (port == 443)
		to = vetted->family == AF_INET ? rig_ports.https4 : rig_ports.https6;
	else
		to = vetted->family == AF_INET ? rig_ports.http4 : rig_ports.http6;
	/* Same family as the vetted address, loopback, the chosen listener. */
	if (vetted->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)(void *)sa;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		in->sin_port = htons((uint16_t)to);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)sa;
		in6->sin6_addr = in6addr_loopback;
		in6->sin6_port = htons((uint16_t)to);
	}
	(void)len;
}

size_t rig_dials(void)
{
	return n_dials;
}
const char *rig_dial_addr(size_t i)
{
	return dials[i].addr;
}
unsigned rig_dial_port(size_t i)
{
	return dials[i].port;
}
void rig_dial_log(const char *path)
{
	dial_log_path = path;
}

void rig_install(const struct rig_ports *ports, const char *ca_file)
{
	rig_ports = *ports;
	rts_fetch_test_seams = (struct rts_fetch_test_seams){
		.resolve = rig_resolve, .dial = rig_dial, .ca_file = ca_file, .arg = NULL};
}

void rig_reset(void)
{
	n_dials = 0;
	rig_resolve_clear();
	rig_resolve_add("www.example.com", RIG_ADDR_WEB);
	rig_resolve_add("v6.example.com", RIG_ADDR_WEB6);
	rig_resolve_add("dual.example.com", RIG_ADDR_WEB6 "," RIG_ADDR_WEB);
	if (record_path[0]) {
		int fd = open(record_path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		if (fd >= 0)
			close(fd);
	}
}

char *rig_record(void)
{
	FILE *f = fopen(record_path, "r");
	if (!f)
		return rts_xstrdup("");
	char *buf = NULL;
	size_t cap = 0;
	ssize_t n = getdelim(&buf, &cap, '\0', f);
	fclose(f);
	if (n < 0) {
		free(buf);
		return rts_xstrdup("");
	}
	return buf;
}

size_t rig_record_count(void)
{
	cleanup_free char *text = rig_record();
	size_t n = 0;
	for (const char *p = text; *p; p++)
		n += *p == '\n';
	return n;
}

/* A loopback port nothing listens on: bound, then closed again. */
static int closed_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		die("cannot find a closed port");
	close(fd);
	return ntohs(a.sin_port);
}

static int port_of(json_object *o, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		die("the fake did not announce its ports");
	return json_object_get_int(v);
}

void rig_start(const char *srcdir)
{
	snprintf(dir, sizeof(dir), "/tmp/rts-fetch-XXXXXX");
	if (!mkdtemp(dir))
		die("mkdtemp");
	snprintf(ca_path, sizeof(ca_path), "%s/ca.pem", dir);
	snprintf(record_path, sizeof(record_path), "%s/record.jsonl", dir);
	cleanup_free char *mkca = rts_xasprintf(
		"sh '%s/tests/fakes/make-ca.sh' '%s' 'DNS:*.example.com, DNS:example.com, IP:%s, IP:%s' >/dev/null", srcdir,
		dir, RIG_ADDR_WEB, RIG_ADDR_WEB6);
	if (system(mkca) != 0)
		die("make-ca.sh failed (is openssl installed?)");
	int fd = open(record_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		die("cannot create the record file");
	close(fd);

	int out[2];
	if (pipe2(out, O_CLOEXEC) < 0)
		die("pipe2");
	cleanup_free char *script = rts_xasprintf("%s/tests/fakes/fetch_fake.py", srcdir);
	cleanup_free char *cert = rts_xasprintf("%s/server.pem", dir);
	cleanup_free char *key = rts_xasprintf("%s/server.key", dir);
	fake_pid = fork();
	if (fake_pid < 0)
		die("fork");
	if (fake_pid == 0) {
		dup2(out[1], STDOUT_FILENO);
		execl(RIG_PYTHON, RIG_PYTHON, script, "--cert", cert, "--key", key, "--record", record_path, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	char line[512];
	size_t len = 0;
	uint64_t deadline = rts_now_ms() + 30000;
	while (len < sizeof(line) - 1 && (len == 0 || line[len - 1] != '\n')) {
		struct pollfd p = {.fd = out[0], .events = POLLIN};
		uint64_t now = rts_now_ms();
		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
			die("the fake did not start within 30 s");
		ssize_t n = read(out[0], line + len, sizeof(line) - 1 - len);
		if (n <= 0)
			die("the fake exited before announcing its ports (python3-brotli missing?)");
		len += (size_t)n;
	}
	close(out[0]);
	line[len] = '\0';
	json_object *ports = json_tokener_parse(line);
	if (!ports)
		die("the fake's first line is not JSON");
	struct rig_ports p = {
		.http4 = port_of(ports, "http4"),
		.https4 = port_of(ports, "https4"),
		.http6 = port_of(ports, "http6"),
		.https6 = port_of(ports, "https6"),
		.tlshang4 = port_of(ports, "tlshang4"),
		.blackhole4 = port_of(ports, "blackhole4"),
		.closed4 = closed_port(),
	};
	json_object_put(ports);
	rig_install(&p, ca_path);
	rig_reset();
}

void rig_stop(void)
{
	if (fake_pid > 0) {
		kill(fake_pid, SIGTERM);
		waitpid(fake_pid, NULL, 0);
		fake_pid = -1;
	}
	if (dir[0]) {
		cleanup_free char *rm = rts_xasprintf("rm -rf '%s'", dir);
		if (system(rm) != 0)
			fprintf(stderr, "fetch rig: cannot remove %s\n", dir);
	}
}
