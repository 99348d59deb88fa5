/* SPDX-License-Identifier: Apache-2.0 */
/* The precheck harness's stdin and stdout (HACKING.md "Precheck runtime"; the harness is
 * worker/precheck/harness.mjs). Pure functions, unit-tested in
 * tests/unit/check_precheck_io.c and fuzzed (tests/fuzz/fuzz_precheck_output.c). */
#ifndef RUNNERD_PRECHECK_IO_H
#define RUNNERD_PRECHECK_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "common/precheck.h"
#include "common/proto.h"

/* Nesting accepted in a run's schedule (statd parsed the control line with the same
 * bound around it). */
#define RUNNERD_PRECHECK_SCHEDULE_DEPTH 16
/* The longest field name a bad_input answer may carry that runnerd logs. */
#define RUNNERD_PRECHECK_FIELD_MAX 32u

/* One run's input; all borrowed. */
struct runnerd_precheck_input {
	const char *script;    /* 1..RTS_PRECHECK_SCRIPT_MAX bytes of UTF-8 */
	const char *fired_at;  /* rts_precheck_fired_at_parse() accepts it */
	const char *time_zone; /* rts_precheck_time_zone_valid() */
	const char *today;     /* rts_precheck_today_parse() */
	const char *schedule;  /* JSON text of any value, at most RTS_PRECHECK_SCHEDULE_MAX bytes */
	const struct rts_precheck_pair *pairs; /* what the script may call (rts_precheck_allowed()) */
	size_t n_pairs;
	uint32_t max_calls; /* 0..RTS_PRECHECK_MAX_CALLS_MAX */
};

/* The harness's stdin: {"v":1,"script","firedAt","timeZone","today","schedule",
 * "tools":[{"server","tool"}...],"maxCalls"}, every key as the harness requires it. The
 * schedule is parsed strictly (RUNNERD_PRECHECK_SCHEDULE_DEPTH) and passed as that value.
 * Returns 0 with *out (heap, NUL-terminated, free()) and *out_len; -EINVAL when a field
 * is not what the struct says (the caller validated them: a bug or a confused statd);
 * -E2BIG when the input would exceed RTS_PRECHECK_INPUT_MAX bytes. */
int runnerd_precheck_input(const struct runnerd_precheck_input *in, char **out, size_t *out_len);

enum runnerd_precheck_result {
	RUNNERD_PRECHECK_ANSWER,    /* a valid result line: *answer and *text */
	RUNNERD_PRECHECK_BAD_INPUT, /* {"v":1,"error":"bad_input","field":F}: the harness refused our input */
	RUNNERD_PRECHECK_MALFORMED, /* anything else: the run failed */
};

/* Read the harness's stdout (len bytes, untrusted: the script shares the process and can
 * write fd 1 itself) strictly, as HACKING.md "Precheck runtime" gives it: exactly one line
 * ending in '\n', one strict JSON object with nothing else on the line, one of
 *   {"v":1,"wake":false}                        -> RTS_PRECHECK_SLEEP, *text NULL
 *   {"v":1,"wake":false,"note":N}               -> RTS_PRECHECK_NOTE (N at most RTS_PRECHECK_NOTE_MAX)
 *   {"v":1,"wake":true,"context":C}             -> RTS_PRECHECK_CONTEXT (at most RTS_PRECHECK_CONTEXT_MAX, may be "")
 *   {"v":1,"wake":true,"error":E}               -> RTS_PRECHECK_SCRIPT_ERROR (1..RTS_PRECHECK_ERROR_MAX)
 * with strings of UTF-8 without NUL and no other member; *text is a heap copy (free()).
 * exit_status is how the container ended (docker run's exit status; -1 when the CLI did
 * not exit normally): every answer requires 0. The bad_input line with exit status 1
 * gives RUNNERD_PRECHECK_BAD_INPUT and field (RUNNERD_PRECHECK_FIELD_MAX + 1 bytes) its
 * field name when it is [A-Za-z]{1,32}, else "". Anything else is
 * RUNNERD_PRECHECK_MALFORMED; nothing of it is returned. */
enum runnerd_precheck_result runnerd_precheck_output_parse(const char *buf, size_t len, int exit_status,
							   uint32_t *answer, char **text,
							   char field[RUNNERD_PRECHECK_FIELD_MAX + 1]);

#endif
