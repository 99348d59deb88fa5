/* SPDX-License-Identifier: Apache-2.0 */
/* The control operations of the precheck runner (DESIGN.md 8.3; HACKING.md "Control
 * protocol answers"): their fields, and the text precheck_describe gives the model.
 *
 *   {"op":"precheck","id","channel","target","tier","script","approved":[...],"firedAt",
 *    "timeZone","today","schedule"}
 *   {"op":"precheck_describe","id","channel","target","tier"}
 *
 * Pure functions on parsed JSON, like statd/request.h: no daemon state, no file system, no
 * logging (tests/unit/check_statd_precheck.c, tests/fuzz/fuzz_precheck_request.c). Every
 * detail text comes from the tables, never from the request. */
#ifndef STATD_PRECHECK_REQUEST_H
#define STATD_PRECHECK_REQUEST_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/conf.h"
#include "statd/request.h"

/* Error codes of the precheck ops: in answers ({"id","error":CODE}) when the request
 * cannot be taken at all, in error events ({"id","event":"error","error":CODE}) when a
 * valid request could not be started. */
#define STATD_E_NOT_CONFIGURED "not_configured" /* answer: the config has no "precheck" */
#define STATD_E_UNKNOWN_TIME_ZONE "unknown_time_zone" /* answer: no zone file of that name */

/* A "precheck" request as statd_precheck_parse() read it. Strings and JSON values are
 * borrowed from the request. */
struct statd_precheck_request {
	json_object *id; /* first: the shared id row stores at offset 0 */
	const char *channel;
	const char *target;
	const char *tier; /* NULL: the run has no tier */
	const char *script;
	json_object *approved; /* array of approvals (common/precheck.h) */
	const char *fired_at;
	const char *time_zone;
	const char *today;
	json_object *schedule; /* any JSON value; NULL stands for JSON null */
	int64_t fired_at_s;
	char detail[STATD_DETAIL_MAX];
};

/* Validate req (op "precheck"): a valid id first, no member the op does not define, then
 * every member in the order above (HACKING.md gives each one's rule), and last that today
 * can be firedAt's date in some zone (rts_precheck_today_plausible()) and that the
 * schedule serialises within RTS_PRECHECK_SCHEDULE_MAX bytes. Returns 0, or -EINVAL with
 * *detail (into r) naming the first problem. */
int statd_precheck_parse(json_object *req, struct statd_precheck_request *r, const char **detail);

/* The approvals as they travel on the daemon links: joined by '\n' (heap, caller frees). */
char *statd_precheck_approved_text(const struct statd_precheck_request *r);

/* The schedule as JSON text (heap, caller frees): "null" for JSON null. */
char *statd_precheck_schedule_text(const struct statd_precheck_request *r);

/* A "precheck_describe" request. */
struct statd_precheck_describe {
	json_object *id; /* first, as above */
	const char *channel;
	const char *target;
	const char *tier; /* NULL: no tier */
	char detail[STATD_DETAIL_MAX];
};

/* Validate req (op "precheck_describe"); as statd_precheck_parse(). */
int statd_precheck_describe_parse(json_object *req, struct statd_precheck_describe *r, const char **detail);

/* What precheck_describe answers (seed: "The runner's describe tells the model this
 * contract and what it may call"): the script's contract, its limits (p's maxCalls and
 * timeoutMs), how to read dates in the run's zone (Intl's formatToParts, not format()'s
 * text, whose shape ICU versions change), and exactly the tools the first grant matching
 * (channel, target, tier) gives, each with its approval name, or that it may call none.
 * Heap text (caller frees), plain UTF-8. */
char *statd_precheck_describe_text(const struct rts_precheck *p, const char *channel, const char *target,
				   const char *tier);

#endif
