/* SPDX-License-Identifier: Apache-2.0 */
/* POST /worker/compact of a rich channel (seed, "Compaction"): the worker asks the host
 * compactor (rich.compaction.command) to summarise Pi's preparation, or reports a
 * compaction so the host logs it.
 *
 *   {"turnId": ID, "request": PiCompactRequest}  -> 200 PiCompaction, or 204: fall back to
 *                                                   Pi's own summary (the reason is logged)
 *   {"turnId": ID, "report": REPORT}             -> 204 (logged)
 *
 * PiCompactRequest: {"reason": "threshold"|"overflow"|"manual", "tokensBefore": N,
 * "firstKeptEntryId", "isSplitTurn", "messagesToSummarize": [..], "turnPrefixMessages":
 * [..], "keptMessages": [..], "previousSummary"?, "customInstructions"?, "readFiles":
 * [paths], "modifiedFiles": [paths]} (the messages are Pi's objects; only their privacy tags
 * are looked into, brokerd_compact_request_for_host()).
 * The compactor gets {"channel", "request"} on stdin and prints a PiCompaction or nothing:
 * {"summary", "firstKeptEntryId" (the request's), "tokensBefore", "estimatedTokensAfter"?,
 * "details"? (an object)}; the worker gets it with details.engine set to
 * rich.compaction.engine.
 * REPORT: {"event"?: "compacted" (the default)|"failed"|"skipped"|"fallback", "trigger"?: "threshold"|
 * "overflow"|"manual", "engine"?: [A-Za-z0-9._-]{1,64}, "tokensBefore"?, "tokensAfter"?,
 * "contextAfter"?, "nextCompactionAt"? (non-negative integers), "reason"?: [a-z0-9 _-]
 * {1,128}} (seed: the host logs conversation compacted, compaction failed, compaction skips
 * the extension for Pi's summary past the ceiling, compaction falls back with its reason).
 *
 * Limits (seed): three requests and sixteen reports per turn; a request over
 * rich.compaction.maxRequestBytes, a fourth request, one while another compaction still
 * runs, a compactor that fails, times out (its own timeout or half the turn's time left,
 * whichever is shorter), prints nothing or answers out of shape falls back to Pi's
 * summary. Pure parts below; brokerd_rich_worker_compact() (rich.h) does the rest. */
#ifndef BROKERD_COMPACT_H
#define BROKERD_COMPACT_H

#include <json.h>
#include <stddef.h>

/* Split a parsed /worker/compact body: exactly turnId and one of request or report.
 * Returns 0 with *turn_id and either *request or *report (borrowed; the other NULL), or
 * -EINVAL with *why. */
int brokerd_compact_envelope(json_object *doc, const char **turn_id, json_object **request, json_object **report,
			     const char **why);

/* 0 when req is a PiCompactRequest as above, else -EINVAL with *why. */
int brokerd_compact_request_check(json_object *req, const char **why);

/* What the host compactor gets of a checked request req: a copy in which the three message
 * lists hold no tool result tagged private (details.privateTo, Pi's form of a host tool's
 * privateTo), whoever it is private to (a summary is replayed to every later reader), nor
 * the assistant's toolCall blocks whose id such a result answers. *dropped: how many
 * messages and blocks were left out. Caller owns the copy (members shared by reference). */
json_object *brokerd_compact_request_for_host(json_object *req, size_t *dropped);

/* The compactor printed len bytes at out for request req: 0 with *answer (caller frees),
 * -ENODATA when it printed nothing (only whitespace), -EINVAL with *why when it is out of
 * shape. */
int brokerd_compact_answer_build(const char *out, size_t len, json_object *req, const char *engine, char **answer,
				 const char **why);

/* A report as one log line's text into line (len bytes; never report data beyond the fixed
 * fields' values). Returns 0, or -EINVAL with *why. */
int brokerd_compact_report_format(json_object *report, char *line, size_t len, const char **why);

#endif
