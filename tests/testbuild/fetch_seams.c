/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <json.h>
#include <pthread.h>

#include "common/fetch_seams.h"
#include "common/log.h"
#include "common/util.h"
#include "tests/testbuild/fetch_seams.h"
#include "tests/unit/fetch_rig.h"

#define NAMES_MAX 256u
#define LINE_MAX_ 4096u

static char hosts_path[1024];

/* Lookups so far per name, for the n-th answer. Lookups run on the fetch's helper
 * threads, several turns at once. */
static pthread_mutex_t lookups_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char name[256];
	unsigned n;
} lookups[NAMES_MAX];

static unsigned next_lookup(const char *host)
{
	pthread_mutex_lock(&lookups_lock);
	unsigned k = 0;
	size_t i = 0;
	while (i < NAMES_MAX && lookups[i].name[0] && strcmp(lookups[i].name, host) != 0)
		i++;
	if (i < NAMES_MAX) {
		if (!lookups[i].name[0])
			snprintf(lookups[i].name, sizeof(lookups[i].name), "%s", host);
		k = lookups[i].n++;
	}
	pthread_mutex_unlock(&lookups_lock);
	return k;
}

/* The answer for host from the hosts file: a count, or -1 for a name that does not exist. */
static int file_resolve(void *arg, const char *host, struct rts_netaddr *out, size_t max)
{
	FILE *f = fopen(hosts_path, "re");
	if (!f)
		return -1;
	char line[LINE_MAX_];
	char *answers[64];
	size_t n_answers = 0;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL;
		char *name = strtok_r(line, " \t\n", &save);
		if (!name || strcmp(name, host) != 0)
			continue;
		for (char *a = strtok_r(NULL, " \t\n", &save); a && n_answers < RTS_ARRAY_SIZE(answers);
		     a = strtok_r(NULL, " \t\n", &save))
			answers[n_answers++] = a;
		break;
	}
	fclose(f);
	if (n_answers == 0)
		return -1;
	unsigned k = next_lookup(host);
	const char *ans = answers[k < n_answers ? k : n_answers - 1];
	if (strcmp(ans, "NXDOMAIN") == 0)
		return -1;
	if (strcmp(ans, "EMPTY") == 0)
		return 0;
	char copy[LINE_MAX_];
	snprintf(copy, sizeof(copy), "%s", ans);
	int n = 0;
	char *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t && (size_t)n < max; t = strtok_r(NULL, ",", &save))
		if (rig_parse_addr(t, &out[n]))
			n++;
	return n;
}

static int port_of(json_object *o, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		fatal_f("test build: RTS_TESTBUILD_FETCH_PORTS has no port \"%s\"", key);
	return json_object_get_int(v);
}

void brokerd_testbuild_fetch_seams(void)
{
	const char *ports_text = getenv("RTS_TESTBUILD_FETCH_PORTS");
	const char *ca = getenv("RTS_TESTBUILD_FETCH_CA");
	const char *hosts = getenv("RTS_TESTBUILD_FETCH_HOSTS");
	if (!ports_text || !ca || !hosts)
		fatal_f("test build: RTS_TESTBUILD_FETCH_PORTS, RTS_TESTBUILD_FETCH_CA and RTS_TESTBUILD_FETCH_HOSTS "
			"must be set (tests/testbuild/fetch_seams.h)");
	json_object *ports = json_tokener_parse(ports_text);
	if (!ports)
		fatal_f("test build: RTS_TESTBUILD_FETCH_PORTS is not a JSON object");
	struct rig_ports p = {
		.http4 = port_of(ports, "http4"),
		.https4 = port_of(ports, "https4"),
		.http6 = port_of(ports, "http6"),
		.https6 = port_of(ports, "https6"),
		.tlshang4 = port_of(ports, "tlshang4"),
		.blackhole4 = port_of(ports, "blackhole4"),
		.closed4 = 0, /* port 0 on loopback: the connection is refused */
	};
	json_object_put(ports);
	snprintf(hosts_path, sizeof(hosts_path), "%s", hosts);
	/* The rig's dialer and CA; its resolver is replaced by the file's. The environment
	 * strings stay valid for the life of the process. */
	rig_install(&p, ca);
	rts_fetch_test_seams.resolve = file_resolve;
	log_warning("test build: the fetch's resolver and dialer are test seams (hosts %s); never install this "
		    "binary",
		    hosts_path);
}
