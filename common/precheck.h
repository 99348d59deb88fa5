/* SPDX-License-Identifier: Apache-2.0 */
/* The precheck runner's rules every program applies the same way (DESIGN.md 8.3; seed:
 * "Precheck scripts"): which grant a run gets, which of its tools the approvals cover, and
 * the shape of the run's names and dates.
 *
 * statd answers precheck_describe and validates the op with these; runnerd gives the
 * harness the tools they allow; brokerd enforces exactly the same set from its own copy of
 * the config (the link carries the approvals, never a URL or a key source). Pure
 * functions: no I/O, no allocation except where a result is returned. */
#ifndef RTS_PRECHECK_H
#define RTS_PRECHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/conf.h"

/* The container name's stem is a turn's (rts_container_name), and so are the id rules: a
 * precheck id is 16 lowercase hex digits from rts_turn_id_new(). A run's directory is
 * <precheck.runRoot>/precheck-<id>/ with broker/broker.sock and an empty workspace/. */
#define RTS_PRECHECK_DIR_PREFIX "precheck-"
#define RTS_PRECHECK_BROKER_DIR "broker"
#define RTS_PRECHECK_WORKSPACE_DIR "workspace"

/* Length in characters of <run_root>/precheck-<id>/broker/broker.sock: what must fit
 * RTS_BROKER_SOCK_PATH_MAX, like a turn's socket. */
size_t rts_precheck_sock_path_len(const char *run_root);

/* An MCP tool name as grants and scripts name it: [A-Za-z0-9_.-]{1,RTS_PRECHECK_TOOL_NAME_MAX}. */
bool rts_precheck_tool_name_valid(const char *s);

/* One entry of a run's "approved" list, in one of the three forms an approval takes:
 * SERVER/TOOL (explicit), or a name as the host's hold rules give it (config toolNames:
 * TOOL, or SERVER_TOOL). Accepted: 1..RTS_PRECHECK_APPROVAL_MAX bytes of [A-Za-z0-9_.-]
 * with at most one '/', which then has a server name before it and a tool name after. */
bool rts_precheck_approval_valid(const char *s);

/* The first grant of p whose channel, target and tiers match the run (seed: "first
 * matching grant wins"): a grant without "channel" or "target" matches any; with "tiers"
 * it matches only a run whose tier is listed (tier NULL or "": the run has no tier).
 * NULL when none matches: the run gets no way out. */
const struct rts_precheck_grant *rts_precheck_grant_find(const struct rts_precheck *p, const char *channel,
							  const char *target, const char *tier);

/* The name the host's hold rules know tool of server by (seed: toolName(server, tool)):
 * the tool's own name, or <server>_<tool>. Written to out (at least
 * RTS_PRECHECK_APPROVAL_MAX + 1 bytes). */
void rts_precheck_tool_name(int tool_names, const char *server, const char *tool, char *out, size_t outlen);

/* True when one of the n approvals names tool of server: "SERVER/TOOL" exactly, or the
 * hold-rule name rts_precheck_tool_name() gives it. */
bool rts_precheck_approved(int tool_names, const char *server, const char *tool, char *const *approved, size_t n);

/* A (server, tool) pair a run may call: granted by g and approved. Borrowed from the config. */
struct rts_precheck_pair {
	const struct rts_precheck_server *server;
	const char *tool;
};

/* The pairs of g (NULL: none) that the approvals cover, in the grant's order, into out
 * (RTS_PRECHECK_PAIRS_MAX entries). Returns how many. */
size_t rts_precheck_allowed(const struct rts_precheck_grant *g, int tool_names, char *const *approved, size_t n,
			    struct rts_precheck_pair out[RTS_PRECHECK_PAIRS_MAX]);

/* Split the approvals as they travel between the daemons (entries joined by '\n', "" for
 * none) into a NULL-terminated heap vector (rts_strv_free). Returns the count, or -EINVAL
 * when an entry is not rts_precheck_approval_valid(), there are more than
 * RTS_PRECHECK_APPROVED_MAX or the text is longer than RTS_PRECHECK_APPROVED_TEXT_MAX. */
int rts_precheck_approved_split(const char *text, char ***out);

/* An IANA zone name as the harness accepts it: [A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*,
 * 1..RTS_TIME_ZONE_MAX bytes (no POSIX TZ rules, no offsets, no "..", no leading '/'). */
bool rts_precheck_time_zone_valid(const char *tz);

/* Parse firedAt: YYYY-MM-DDTHH:MM[:SS[.fraction]] and Z or +HH:MM / -HH:MM, at most
 * RTS_PRECHECK_FIRED_AT_MAX bytes, every field in range (a real calendar date, hours 0-23,
 * minutes and seconds 0-59, an offset below 24 h). *epoch_s (may be NULL): the instant in
 * seconds since 1970-01-01T00:00:00Z, the fraction dropped. Returns 0 or -EINVAL. */
int rts_precheck_fired_at_parse(const char *s, int64_t *epoch_s);

/* Parse today: YYYY-MM-DD, a real calendar date (years 0001-9999). *days (may be NULL):
 * days since 1970-01-01. Returns 0 or -EINVAL. */
int rts_precheck_today_parse(const char *s, int64_t *days);

/* True when today can be the date of the instant fired_at_s in some time zone: every zone
 * lies within a day of UTC (offsets run from -12 to +14 hours), so today is the UTC date
 * of that instant, the day before or the day after. A cheap check that a bot did not pass
 * a date from another run. */
bool rts_precheck_today_plausible(int64_t today_days, int64_t fired_at_s);

#endif
