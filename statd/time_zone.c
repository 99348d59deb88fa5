/* SPDX-License-Identifier: Apache-2.0 */
/* A precheck's time zone (statd/time_zone.h). */
#include "config.h"

#include <errno.h>
#include <glib.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "statd/time_zone.h"

/* tzdata.zi (zic(8), "the compact form"): "Z NAME ..." starts a zone, "L TARGET NAME" is a
 * link; rules ("R") and continuation lines name nothing. */
static bool line_names(const char *line, const char *tz)
{
	size_t n = strlen(tz);
	const char *name = NULL;
	if (strncmp(line, "Z ", 2) == 0) {
		name = line + 2;
	} else if (strncmp(line, "L ", 2) == 0) {
		const char *sp = strchr(line + 2, ' ');
		name = sp ? sp + 1 : NULL;
	}
	return name && strncmp(name, tz, n) == 0 && (name[n] == ' ' || name[n] == '\n' || name[n] == '\0');
}

int statd_time_zone_listed(const char *list, const char *tz)
{
	/* The database's placeholder for "zone not yet set": ICU has no such zone. */
	if (strcmp(tz, "Factory") == 0)
		return -ENOENT;
	FILE *f = fopen(list, "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	int ret = -ENOENT;
	errno = 0;
	while (getline(&line, &cap, f) >= 0) {
		if (line_names(line, tz)) {
			ret = 0;
			break;
		}
	}
	if (ret < 0 && ferror(f))
		ret = errno ? -errno : -EIO;
	free(line);
	fclose(f);
	return ret;
}

/* GLib warns on stderr (g_critical) when a file is not TZif; such a file is no zone. */
static bool is_tzif(const char *path)
{
	char magic[4];
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ok = fread(magic, 1, sizeof(magic), f) == sizeof(magic) && memcmp(magic, "TZif", 4) == 0;
	fclose(f);
	return ok;
}

int statd_time_zone_date(const char *zone_file, int64_t epoch_s, char out[RTS_PRECHECK_TODAY_LEN + 1])
{
	/* glibc converts to local time only in the process-wide zone of TZ; setting TZ for
	 * each request would change that zone for everything else statd formats, and setenv
	 * is not safe beside any thread. GLib's GTimeZone reads a TZif file into an object of
	 * its own (thread-safe, footer rules for instants past the last transition included),
	 * so nothing global changes. An absolute path names the file itself. */
	GTimeZone *zone = is_tzif(zone_file) ? g_time_zone_new_identifier(zone_file) : NULL;
	if (!zone)
		return -ENOENT;
	int ret = -ERANGE;
	GDateTime *utc = g_date_time_new_from_unix_utc(epoch_s);
	GDateTime *local = utc ? g_date_time_to_timezone(utc, zone) : NULL;
	if (local) {
		int y, m, d;
		g_date_time_get_ymd(local, &y, &m, &d);
		if (y >= 1 && y <= 9999) {
			snprintf(out, RTS_PRECHECK_TODAY_LEN + 1, "%04d-%02d-%02d", y, m, d);
			ret = 0;
		}
		g_date_time_unref(local);
	}
	if (utc)
		g_date_time_unref(utc);
	g_time_zone_unref(zone);
	return ret;
}
