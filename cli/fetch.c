/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <curl/curl.h>
#include <getopt.h>
#include <limits.h>

#include "cli/fetch.h"
#include "common/fetch.h"
#include "common/log.h"
#include "common/util.h"

static const char fetch_usage[] =
	"usage: roundtable-sandbox fetch [--max-bytes N] [--max-redirects N] [--timeout-ms N] [--no-follow] URL\n"
	"       roundtable-sandbox check-url URL\n";

static int usage_error(const char *msg)
{
	log_error("%s", msg);
	fputs(fetch_usage, stderr);
	return CLI_FETCH_USAGE;
}

/* A whole decimal number in [min, max], digits only (no sign, space or suffix). */
static bool parse_number(const char *s, unsigned long long min, unsigned long long max, unsigned long long *out)
{
	if (!*s || strlen(s) > 20)
		return false;
	unsigned long long v = 0;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		if (v > (ULLONG_MAX - 9) / 10)
			return false;
		v = v * 10 + (unsigned long long)(*p - '0');
	}
	if (v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* The one line a refusal prints, whether or not the log goes to the journal: scripts
 * read it. */
static int refused(const char *why)
{
	fprintf(stderr, "roundtable-sandbox: refused: %s\n", why);
	return CLI_FETCH_REFUSED;
}

static int failed(int r, const char *what, const char *why)
{
	if (r == -EACCES)
		return refused(why);
	log_error("%s: %s", what, why ? why : "failed");
	return CLI_FETCH_FAILED;
}

static int global_init(void)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_error("cannot initialise libcurl");
		return -1;
	}
	return 0;
}

int cli_fetch(const struct rts_opts *o, int argc, char **argv)
{
	enum { OPT_MAX_BYTES = 1, OPT_MAX_REDIRECTS, OPT_TIMEOUT, OPT_NO_FOLLOW };
	static const struct option options[] = {
		{"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
		{"max-redirects", required_argument, NULL, OPT_MAX_REDIRECTS},
		{"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
		{"no-follow", no_argument, NULL, OPT_NO_FOLLOW},
		{0},
	};
	struct rts_fetch_opts fo = RTS_FETCH_OPTS_DEFAULT;
	optind = 0; /* glibc: rescan from scratch, the global options used getopt before us */
	opterr = 1;
	int c;
	unsigned long long v;
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case OPT_MAX_BYTES:
			if (!parse_number(optarg, RTS_FETCH_BYTES_MIN, RTS_FETCH_BYTES_MAX, &v))
				return usage_error("--max-bytes takes a whole number from 1 to 33554432");
			fo.max_bytes = (size_t)v;
			break;
		case OPT_MAX_REDIRECTS:
			if (!parse_number(optarg, 0, RTS_FETCH_REDIRECTS_MAX, &v))
				return usage_error("--max-redirects takes a whole number from 0 to 10");
			fo.max_redirects = (uint32_t)v;
			break;
		case OPT_TIMEOUT:
			if (!parse_number(optarg, RTS_FETCH_TIMEOUT_MIN_MS, RTS_FETCH_TIMEOUT_MAX_MS, &v))
				return usage_error("--timeout-ms takes a whole number from 1 to 120000");
			fo.timeout_ms = (uint32_t)v;
			break;
		case OPT_NO_FOLLOW:
			fo.follow_redirects = false;
			break;
		default:
			fputs(fetch_usage, stderr);
			return CLI_FETCH_USAGE;
		}
	}
	if (argc - optind != 1)
		return usage_error("fetch takes exactly one URL");
	const char *url = argv[optind];
	if (global_init() < 0)
		return CLI_FETCH_FAILED;
	struct rts_fetch_result res;
	const char *why = NULL;
	int r = rts_fetch(url, strlen(url), &fo, &res, &why);
	curl_global_cleanup();
	if (r < 0)
		return failed(r, "fetch failed", why);
	bool ok = fwrite(res.body, 1, res.len, stdout) == res.len;
	rts_fetch_result_release(&res);
	if (!ok) {
		log_error("cannot write to standard output");
		return CLI_FETCH_FAILED;
	}
	return CLI_FETCH_OK;
}

int cli_check_url(const struct rts_opts *o, int argc, char **argv)
{
	static const struct option options[] = {{0}};
	optind = 0;
	opterr = 1;
	if (getopt_long(argc, argv, "", options, NULL) != -1) {
		fputs(fetch_usage, stderr);
		return CLI_FETCH_USAGE;
	}
	if (argc - optind != 1)
		return usage_error("check-url takes exactly one URL");
	const char *url = argv[optind];
	if (global_init() < 0)
		return CLI_FETCH_FAILED;
	const char *why = NULL;
	int r = rts_url_check_public(url, strlen(url), RTS_FETCH_TIMEOUT_DEFAULT_MS, NULL, &why);
	curl_global_cleanup();
	if (r < 0)
		return failed(r, "check-url failed", why);
	return CLI_FETCH_OK;
}
