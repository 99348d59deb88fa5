/* SPDX-License-Identifier: Apache-2.0 */
/* A precheck's time zone (statd/time_zone.h) against this host's tzdata: the names statd
 * accepts are the IANA database's zones and links, and the date of an instant is the date
 * in the zone, not in UTC. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/precheck.h"
#include "common/util.h"
#include "statd/time_zone.h"

START_TEST(test_listed)
{
	/* Zones, links (old names), and the Etc/ zones. */
	const char *ok[] = {"Europe/Berlin", "Pacific/Kiritimati", "UTC", "Etc/UTC", "US/Eastern",
			    "EST5EDT",	     "Etc/GMT+5",	   "Europe/Kiev", "Asia/Calcutta", "GMT"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ok); i++)
		ck_assert_msg(statd_time_zone_listed(STATD_TIME_ZONE_LIST, ok[i]) == 0, "%s refused", ok[i]);
	/* zoneinfo entries that are no zone ICU (the harness's Intl) knows, and names that are
	 * no zone at all or only part of one. */
	const char *bad[] = {"posixrules", "localtime", "Factory", "right/UTC", "posix/Europe/Berlin",
			     "leapseconds", "Europe", "Mars/Olympus_Mons", "europe/berlin", "Europe/Berli", "Z", "L"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++)
		ck_assert_msg(statd_time_zone_listed(STATD_TIME_ZONE_LIST, bad[i]) == -ENOENT, "%s accepted", bad[i]);
	ck_assert_int_eq(statd_time_zone_listed("/nonexistent/tzdata.zi", "UTC"), -ENOENT);
}
END_TEST

/* Only the name fields of Z and L lines count: a rule line or a link's target does not. */
START_TEST(test_listed_reads_names_only)
{
	char path[] = "/tmp/check_statd_time_zone.XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	FILE *f = fdopen(fd, "w");
	fputs("# version 2099a\nR Target 1 2 - Ja 1 0 0 -\nZ Area/Zone 1 - X\nL Area/Zone Old/Alias\n", f);
	fclose(f);
	ck_assert_int_eq(statd_time_zone_listed(path, "Area/Zone"), 0);
	ck_assert_int_eq(statd_time_zone_listed(path, "Old/Alias"), 0);
	ck_assert_int_eq(statd_time_zone_listed(path, "Target"), -ENOENT);
	ck_assert_int_eq(statd_time_zone_listed(path, "Area"), -ENOENT);
	ck_assert_int_eq(statd_time_zone_listed(path, "Old/Alia"), -ENOENT);
	ck_assert_int_eq(statd_time_zone_listed(path, "version"), -ENOENT);
	unlink(path);
}
END_TEST

static void date_in(const char *tz, const char *fired_at, const char *want)
{
	int64_t t;
	char out[RTS_PRECHECK_TODAY_LEN + 1];
	cleanup_free char *file = rts_xasprintf(RTS_ZONEINFO_DIR "/%s", tz);
	ck_assert_int_eq(rts_precheck_fired_at_parse(fired_at, &t), 0);
	ck_assert_int_eq(statd_time_zone_date(file, t, out), 0);
	ck_assert_msg(strcmp(out, want) == 0, "%s in %s: %s, not %s", fired_at, tz, out, want);
}

START_TEST(test_date)
{
	/* Noon UTC is the next day at +14:00 and still the same at -10:00. */
	date_in("Pacific/Kiritimati", "2026-03-01T12:00:00Z", "2026-03-02");
	date_in("Pacific/Honolulu", "2026-03-01T12:00:00Z", "2026-03-01");
	date_in("Pacific/Honolulu", "2026-03-01T09:59:59Z", "2026-02-28");
	/* Around a DST change (Berlin: +01:00 until 2026-03-29T01:00Z, then +02:00). */
	date_in("Europe/Berlin", "2026-03-28T22:59:59Z", "2026-03-28");
	date_in("Europe/Berlin", "2026-03-28T23:00:00Z", "2026-03-29");
	date_in("Europe/Berlin", "2026-07-01T21:59:59Z", "2026-07-01");
	date_in("Europe/Berlin", "2026-07-01T22:00:00Z", "2026-07-02");
	/* Far past the last transition of the file: its footer rule (America/New_York, -04:00
	 * in summer). */
	date_in("America/New_York", "2300-07-01T03:59:59Z", "2300-06-30");
	date_in("America/New_York", "2300-07-01T04:00:00Z", "2300-07-01");
	/* An offset in firedAt is only how the instant is written. */
	date_in("UTC", "2026-03-01T23:30:00-02:00", "2026-03-02");
	date_in("Asia/Kolkata", "0001-01-01T00:00:00Z", "0001-01-01");
}
END_TEST

START_TEST(test_date_refused)
{
	char out[RTS_PRECHECK_TODAY_LEN + 1];
	int64_t t;
	ck_assert_int_eq(statd_time_zone_date("/nonexistent/zone", 0, out), -ENOENT);
	ck_assert_int_eq(statd_time_zone_date(STATD_TIME_ZONE_LIST, 0, out), -ENOENT); /* not TZif */
	/* Year 1 at UTC is year 0 west of Greenwich. */
	ck_assert_int_eq(rts_precheck_fired_at_parse("0001-01-01T00:00:00Z", &t), 0);
	ck_assert_int_eq(statd_time_zone_date(RTS_ZONEINFO_DIR "/America/New_York", t, out), -ERANGE);
	ck_assert_int_eq(rts_precheck_fired_at_parse("9999-12-31T23:00:00Z", &t), 0);
	ck_assert_int_eq(statd_time_zone_date(RTS_ZONEINFO_DIR "/Asia/Tokyo", t, out), -ERANGE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("statd_time_zone");
	TCase *tc = tcase_create("time_zone");
	tcase_add_test(tc, test_listed);
	tcase_add_test(tc, test_listed_reads_names_only);
	tcase_add_test(tc, test_date);
	tcase_add_test(tc, test_date_refused);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
