/* SPDX-License-Identifier: Apache-2.0 */
/* The audit trail of broker decisions, and brokerd's metrics (issue 15, DESIGN.md 8.4).
 *
 * Every call a turn's broker socket receives (every request the gate counts against the
 * call budget) ends in exactly one decision entry: in the journal with
 * MESSAGE_ID=BROKERD_AUDIT_MESSAGE_ID and the fields
 *   RTS_TURN_ID, RTS_CHANNEL_HASH (64 hex digits), RTS_CALL (its number in the turn),
 *   RTS_ROUTE (model, tool, mcp, none: no route was matched), RTS_DECISION (allowed: the
 *   worker got 200 and the answer; refused: it got an error code or no answer),
 *   RTS_RULE (the rule that decided, from the list in roundtable-sandbox-brokerd(8)),
 *   RTS_RESULT (the code the worker got: ok, bad_request, ..., or closed for no answer),
 *   RTS_FORWARDED (yes when the request reached an upstream or a tool process),
 *   RTS_DURATION_MS;
 * on stderr the same fields in braces after the message (common/log.h). Never a payload,
 * a tool or server name from the request, or a key. At most BROKERD_AUDIT_CALLS_MAX
 * entries per turn: calls beyond (a worker that goes on after its budget is spent) are
 * counted and summed up in one entry when the turn closes, so a guest cannot flood the
 * journal.
 *
 * A rich channel's listener (brokerd/rich.h) writes the same entries through
 * brokerd_audit_decision(), with routes named rich_*: RTS_TURN_ID is the turn the call
 * belongs to, or "-" for a call outside any turn (the worker's handshake, the start-up
 * scope), and RTS_CALL its number since the channel's current turn was admitted (or since
 * the bind). An attachment fetch (BROKER_ATTACH_FETCH, for a turn statd is still preparing)
 * gets an entry with RTS_CALL 0 and RTS_CHANNEL_HASH "-": the request names only the turn.
 * An idle long poll that hands out nothing decides nothing: it is counted in
 * the metrics but gets no entry (one every 25 s per idle channel would fill the journal). */
#ifndef BROKERD_AUDIT_H
#define BROKERD_AUDIT_H

#include <stdbool.h>
#include <stdint.h>

#include "brokerd/brokerd.h"
#include "common/metrics.h"

/* "broker decision" (generated once; journalctl MESSAGE_ID=...). */
#define BROKERD_AUDIT_MESSAGE_ID "0bf421491732452c8a2331a833fe4e73"
/* Entries per turn: the budget, and the first call beyond it. */
#define BROKERD_AUDIT_CALLS_MAX (RTS_BROKER_CALLS_PER_TURN + 1u)

/* One decision. route: "model", "fetch", "tool", "mcp", "precheck" or "none" (a rich
 * listener's: "rich_model", "rich_count_tokens", "rich_mcp", "rich_tool", "rich_worker",
 * "rich_compact", "rich_none"; an attachment fetched for a rich turn: "rich_attachment";
 * others are counted as "other"); rule: a static rule name;
 * result: what the worker got (BROKERD_RESULT_MAX_ for no answer, logged as "closed");
 * forwarded: something reached an upstream or a tool; ms: accept to decision. Returns
 * false when the entry was not written (call_no beyond BROKERD_AUDIT_CALLS_MAX; the
 * metrics count it all the same). Thread-safe. */
bool brokerd_audit_call(const struct brokerd_binding *b, unsigned call_no, const char *route, const char *rule,
			enum brokerd_result result, bool forwarded, uint64_t ms);
/* The same with the identity spelled out (turn_id or channel_hash NULL: "-") and the entry
 * limit given:
 * call_no beyond call_max is counted (metrics) but not written, and false is returned. */
bool brokerd_audit_decision(const char *turn_id, const char *channel_hash, unsigned call_no, unsigned call_max,
			    const char *route, const char *rule, enum brokerd_result result, bool forwarded,
			    uint64_t ms);
/* At turn close, when calls > BROKERD_AUDIT_CALLS_MAX: one entry saying how many calls
 * were not logged one by one (RTS_RULE=unlogged_beyond_budget, RTS_CALLS). */
void brokerd_audit_summary(const struct brokerd_binding *b, unsigned calls);
/* The summary entry for unlogged calls not written one by one (turn_id NULL: "-"); nothing
 * when unlogged is 0. */
void brokerd_audit_unlogged(const char *turn_id, const char *channel_hash, unsigned unlogged);

/* Count a call in the metrics only, with no entry (an idle long poll, brokerd/rich.h). */
void brokerd_metrics_call(const char *route, enum brokerd_result result);

/* A connection closed at once because BROKERD_CONNECTIONS_PER_TURN were open (not a
 * call: no entry, a counter). Thread-safe. */
void brokerd_metrics_connection_refused(void);
/* One upstream request (what: "model", "mcp" or "anthropic", a rich channel's model
 * upstream): how long it took (us), whether it ran on
 * a kept connection, and whether it got a whole answer. Thread-safe. */
void brokerd_metrics_upstream(const char *what, uint64_t us, bool reused, bool answered);
/* brokerd's metrics text (common/metrics.h lists its families); turns: bound now. The
 * caller frees it. */
char *brokerd_metrics_render(unsigned turns);

#endif
