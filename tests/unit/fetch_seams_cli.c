/* SPDX-License-Identifier: Apache-2.0 */
/* fetch and check-url over the fetch's test seams, for cli/check-fetch.py and
 * tests/bench/fetch.py. Never installed.
 *
 *   fetch-seams-cli --ports H4,S4,H6,S6,TLSHANG4,BLACKHOLE4 --ca FILE [--dial-log FILE]
 *                   [--resolve NAME=ADDR[,ADDR...]]... VERB ARGS...
 *
 * --ports are the listeners tests/fakes/fetch_fake.py announced; --resolve adds one answer
 * for NAME (repeat it for the next lookups); --dial-log appends "ADDR PORT" for every
 * connection the fetch opens. VERB is fetch or check-url, run by cli/fetch.c exactly as the
 * real CLI runs it. */
#include "config.h"

#include "cli/fetch.h"
#include "common/log.h"
#include "common/util.h"
#include "tests/unit/fetch_rig.h"

int main(int argc, char **argv)
{
	rts_log_init("roundtable-sandbox");
	struct rig_ports ports = {0};
	const char *ca = NULL;
	int i = 1;
	rig_resolve_clear();
	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		const char *opt = argv[i], *val = argv[i + 1];
		if (strcmp(opt, "--ports") == 0) {
			if (sscanf(val, "%d,%d,%d,%d,%d,%d", &ports.http4, &ports.https4, &ports.http6, &ports.https6,
				   &ports.tlshang4, &ports.blackhole4) != 6)
				return 2;
		} else if (strcmp(opt, "--ca") == 0) {
			ca = val;
		} else if (strcmp(opt, "--dial-log") == 0) {
			rig_dial_log(val);
		} else if (strcmp(opt, "--resolve") == 0) {
			const char *eq = strchr(val, '=');
			if (!eq)
				return 2;
			cleanup_free char *name = rts_xstrndup(val, (size_t)(eq - val));
			rig_resolve_add(name, eq + 1);
		} else {
			fprintf(stderr, "fetch-seams-cli: unknown option %s\n", opt);
			return 2;
		}
	}
	if (i >= argc || !ca) {
		fprintf(stderr, "fetch-seams-cli: usage: see tests/unit/fetch_seams_cli.c\n");
		return 2;
	}
	rig_install(&ports, ca);
	struct rts_opts o = {0};
	int ex;
	if (strcmp(argv[i], "fetch") == 0)
		ex = cli_fetch(&o, argc - i, argv + i);
	else if (strcmp(argv[i], "check-url") == 0)
		ex = cli_check_url(&o, argc - i, argv + i);
	else
		return 2;
	if (fflush(stdout) != 0 || ferror(stdout))
		return 1;
	return ex;
}
