/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/ids.h"
#include "common/paths.h"
#include "common/precheck.h"
#include "common/tools.h"
#include "common/util.h"

size_t rts_precheck_sock_path_len(const char *run_root)
{
	return strlen(run_root) + 1 + strlen(RTS_PRECHECK_DIR_PREFIX) + RTS_TURN_ID_LEN + 1 +
	       strlen(RTS_PRECHECK_BROKER_DIR) + 1 + strlen(RTS_BROKER_SOCK_NAME);
}

static bool tool_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
	       c == '-';
}

static bool tool_span_valid(const char *s, size_t n)
{
	if (n == 0 || n > RTS_PRECHECK_TOOL_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!tool_char(s[i]))
			return false;
	return true;
}

bool rts_precheck_tool_name_valid(const char *s)
{
	return s && tool_span_valid(s, strlen(s));
}

bool rts_precheck_approval_valid(const char *s)
{
	if (!s)
		return false;
	size_t n = strlen(s);
	if (n == 0 || n > RTS_PRECHECK_APPROVAL_MAX)
		return false;
	const char *slash = strchr(s, '/');
	if (!slash) {
		/* TOOL or SERVER_TOOL: both are tool-name characters. */
		for (size_t i = 0; i < n; i++)
			if (!tool_char(s[i]))
				return false;
		return true;
	}
	char server[RTS_NAME_MAX + 1];
	size_t sn = (size_t)(slash - s);
	if (sn == 0 || sn > RTS_NAME_MAX)
		return false;
	memcpy(server, s, sn);
	server[sn] = '\0';
	return rts_name_valid(server, RTS_NAME_MAX) && tool_span_valid(slash + 1, strlen(slash + 1));
}

static bool tier_listed(const struct rts_precheck_grant *g, const char *tier)
{
	if (!tier || !tier[0])
		return false;
	for (char **t = g->tiers; t && *t; t++)
		if (strcmp(*t, tier) == 0)
			return true;
	return false;
}

const struct rts_precheck_grant *rts_precheck_grant_find(const struct rts_precheck *p, const char *channel,
							  const char *target, const char *tier)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n_grants; i++) {
		const struct rts_precheck_grant *g = &p->grants[i];
		if (g->channel && strcmp(g->channel, channel) != 0)
			continue;
		if (g->target && strcmp(g->target, target) != 0)
			continue;
		if (g->has_tiers && !tier_listed(g, tier))
			continue;
		return g;
	}
	return NULL;
}

void rts_precheck_tool_name(int tool_names, const char *server, const char *tool, char *out, size_t outlen)
{
	if (tool_names == RTS_TOOL_NAMES_SERVER_TOOL)
		snprintf(out, outlen, "%s_%s", server, tool);
	else
		snprintf(out, outlen, "%s", tool);
}

bool rts_precheck_approved(int tool_names, const char *server, const char *tool, char *const *approved, size_t n)
{
	char held[RTS_PRECHECK_APPROVAL_MAX + 1];
	rts_precheck_tool_name(tool_names, server, tool, held, sizeof(held));
	size_t sl = strlen(server);
	for (size_t i = 0; i < n; i++) {
		const char *a = approved[i];
		if (strcmp(a, held) == 0)
			return true;
		if (strncmp(a, server, sl) == 0 && a[sl] == '/' && strcmp(a + sl + 1, tool) == 0)
			return true;
	}
	return false;
}

size_t rts_precheck_allowed(const struct rts_precheck_grant *g, int tool_names, char *const *approved, size_t n,
			    struct rts_precheck_pair out[RTS_PRECHECK_PAIRS_MAX])
{
	size_t k = 0;
	if (!g)
		return 0;
	for (size_t i = 0; i < g->n_servers; i++) {
		const struct rts_precheck_server *srv = &g->servers[i];
		for (size_t j = 0; j < srv->n_tools && k < RTS_PRECHECK_PAIRS_MAX; j++)
			if (rts_precheck_approved(tool_names, srv->name, srv->tools[j], approved, n))
				out[k++] = (struct rts_precheck_pair){.server = srv, .tool = srv->tools[j]};
	}
	return k;
}

int rts_precheck_approved_split(const char *text, char ***out)
{
	*out = NULL;
	size_t len = strlen(text);
	if (len > RTS_PRECHECK_APPROVED_TEXT_MAX)
		return -EINVAL;
	char **v = rts_xcalloc(RTS_PRECHECK_APPROVED_MAX + 1, sizeof(char *));
	size_t n = 0;
	const char *p = text;
	while (len > 0) {
		const char *nl = memchr(p, '\n', (size_t)(text + len - p));
		size_t seg = nl ? (size_t)(nl - p) : strlen(p);
		if (n == RTS_PRECHECK_APPROVED_MAX || seg > RTS_PRECHECK_APPROVAL_MAX) {
			rts_strv_free(v);
			return -EINVAL;
		}
		v[n] = rts_xstrndup(p, seg);
		if (!rts_precheck_approval_valid(v[n++])) {
			rts_strv_free(v);
			return -EINVAL;
		}
		if (!nl)
			break;
		p = nl + 1;
		/* A trailing separator would be an empty entry. */
		if (*p == '\0') {
			rts_strv_free(v);
			return -EINVAL;
		}
	}
	*out = v;
	return (int)n;
}

bool rts_precheck_time_zone_valid(const char *tz)
{
	if (!tz)
		return false;
	size_t n = strlen(tz);
	if (n == 0 || n > RTS_TIME_ZONE_MAX || !((tz[0] >= 'a' && tz[0] <= 'z') || (tz[0] >= 'A' && tz[0] <= 'Z')))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = tz[i];
		bool part = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
			    c == '+' || c == '-';
		if (c == '/') {
			/* A component after every slash: no "//", no trailing '/'. */
			if (tz[i + 1] == '\0' || tz[i + 1] == '/')
				return false;
		} else if (!part) {
			return false;
		}
	}
	return true;
}

/* ---- dates ---- */

/* n decimal digits at s, or -1. */
static int digits(const char *s, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static bool leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int y, int m)
{
	static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && leap(y) ? 29 : d[m - 1];
}

/* Days since 1970-01-01 of a proleptic Gregorian date (the civil-from-days inverse). */
static int64_t days_from_civil(int y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* YYYY-MM-DD at s (exactly 10 bytes looked at). */
static int date_at(const char *s, int64_t *days)
{
	int y = digits(s, 4), m = digits(s + 5, 2), d = digits(s + 8, 2);
	if (y < 1 || s[4] != '-' || s[7] != '-' || m < 1 || m > 12 || d < 1 || d > month_days(y, m))
		return -EINVAL;
	if (days)
		*days = days_from_civil(y, m, d);
	return 0;
}

int rts_precheck_today_parse(const char *s, int64_t *days)
{
	if (!s || strlen(s) != RTS_PRECHECK_TODAY_LEN)
		return -EINVAL;
	return date_at(s, days);
}

int rts_precheck_fired_at_parse(const char *s, int64_t *epoch_s)
{
	if (!s)
		return -EINVAL;
	size_t n = strlen(s);
	int64_t days;
	/* YYYY-MM-DDTHH:MM is the shortest body; Z is the shortest zone. */
	if (n < 17 || n > RTS_PRECHECK_FIRED_AT_MAX || date_at(s, &days) < 0 || s[10] != 'T')
		return -EINVAL;
	int hh = digits(s + 11, 2), mm = digits(s + 14, 2), ss = 0;
	if (hh < 0 || hh > 23 || s[13] != ':' || mm < 0 || mm > 59)
		return -EINVAL;
	const char *p = s + 16;
	if (*p == ':') {
		ss = digits(p + 1, 2);
		if (ss < 0 || ss > 59)
			return -EINVAL;
		p += 3;
		if (*p == '.') {
			size_t k = 0;
			while (p[1 + k] >= '0' && p[1 + k] <= '9')
				k++;
			if (k < 1 || k > 9)
				return -EINVAL;
			p += 1 + k;
		}
	}
	int offset_s = 0;
	if (p[0] == 'Z' && p[1] == '\0') {
		offset_s = 0;
	} else if ((p[0] == '+' || p[0] == '-') && strlen(p) == 6 && p[3] == ':') {
		int oh = digits(p + 1, 2), om = digits(p + 4, 2);
		if (oh < 0 || oh > 23 || om < 0 || om > 59)
			return -EINVAL;
		offset_s = (oh * 60 + om) * 60 * (p[0] == '-' ? -1 : 1);
	} else {
		return -EINVAL;
	}
	if (epoch_s)
		*epoch_s = days * 86400 + hh * 3600 + mm * 60 + ss - offset_s;
	return 0;
}

bool rts_precheck_today_plausible(int64_t today_days, int64_t fired_at_s)
{
	/* Floor division: instants before 1970 have negative days too. */
	int64_t utc_days = fired_at_s >= 0 ? fired_at_s / 86400 : -((-fired_at_s + 86399) / 86400);
	return today_days >= utc_days - 1 && today_days <= utc_days + 1;
}
