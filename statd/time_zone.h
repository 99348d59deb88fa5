/* SPDX-License-Identifier: Apache-2.0 */
/* A precheck's time zone (DESIGN.md 8.3): which names statd accepts, and the date of an
 * instant in one, so that `today` is checked against firedAt exactly.
 *
 * The harness gives the name to Intl (ICU), which refuses the zoneinfo entries that are not
 * zones (posixrules, localtime, the posix/ and right/ trees, leapseconds, Factory). The
 * names statd accepts are those of the IANA database itself: a Zone or Link line of its
 * compact source tzdata.zi, which zic built the host's zone files from, minus Factory; every
 * one of those is a zone ICU knows. A name only ICU knows (SystemV/EST5 and other old
 * aliases) has no zone data on this host to check `today` with, and is refused too. */
#ifndef STATD_TIME_ZONE_H
#define STATD_TIME_ZONE_H

#include <stdint.h>

#include "common/limits.h"
#include "common/paths.h"

/* The IANA database's list of names as Debian's tzdata installs it. */
#define STATD_TIME_ZONE_LIST RTS_ZONEINFO_DIR "/tzdata.zi"

/* 0 when tz (a name rts_precheck_time_zone_valid() accepted) is a Zone or Link name of the
 * tzdata.zi file list and not "Factory"; -ENOENT when it is not, -errno when list cannot
 * be read. Reads the file each call (about 100 KiB; a precheck runs once per firing). */
int statd_time_zone_listed(const char *list, const char *tz);

/* The date, YYYY-MM-DD into out (RTS_PRECHECK_TODAY_LEN + 1 bytes), of the instant epoch_s
 * (seconds since 1970-01-01T00:00:00Z) in the zone whose TZif file is zone_file (an
 * absolute path). Returns 0, -ENOENT when the file is no zone GLib can read, or -ERANGE
 * when the date falls outside the years 1 to 9999. */
int statd_time_zone_date(const char *zone_file, int64_t epoch_s, char out[RTS_PRECHECK_TODAY_LEN + 1]);

#endif
