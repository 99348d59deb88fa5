/* SPDX-License-Identifier: Apache-2.0 */
/* Logging for the daemons and the CLI.
 *
 * Lines go to the systemd journal when stderr is connected to it ($JOURNAL_STREAM names
 * stderr, as under a unit), otherwise (or when the journal refuses a line) to stderr as
 * "ident: level: message". Journal entries carry MESSAGE, PRIORITY, SYSLOG_IDENTIFIER and,
 * for rts_log_turn() lines, only the fields given: RTS_TURN_ID, RTS_CHANNEL_HASH (the full
 * 64 hex digits), RTS_OUTCOME, RTS_DURATION_MS (e.g. `journalctl RTS_OUTCOME=timeout`).
 * Rules every caller follows: never log a request or reply payload, a credential, or an
 * upstream URL; channel keys are logged only as their hash. */
#ifndef RTS_LOG_H
#define RTS_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <syslog.h>

/* ident is kept by pointer (pass a string literal). */
void rts_log_init(const char *ident);
/* Messages with priority numerically above max_prio (e.g. LOG_DEBUG) are dropped (the
 * state-machine suites quieten their expected warnings with it). */
void rts_log_set_max_priority(int max_prio);

void rts_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Logs and returns -abs(err). errno is set to abs(err) while formatting, so "%m" works. */
int rts_log_errno(int prio, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* One structured line about a turn. turn_id and channel_hash may be NULL; outcome is a
 * short word ("ok", "error", "cancelled", "timeout"); duration_ms is ignored when 0. */
void rts_log_turn(int prio, const char *turn_id, const char *channel_hash, const char *outcome,
		  uint64_t duration_ms, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* One structured entry with fields of the caller's choice (audit records, such as brokerd's
 * broker decisions). In the journal: MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, MESSAGE_ID (32
 * lowercase hex digits, a fixed id per kind of entry, or NULL for none) and each of the n
 * fields as NAME=value. On stderr the same fields follow the message, so tests and
 * hand-started daemons see them: "ident: level: message {MESSAGE_ID=... NAME=value ...}".
 * Names are journal field names ([A-Z0-9_], not starting with _); values must be short
 * tokens without spaces (ids, hashes, rule names, numbers): a control character or space
 * is replaced by '?'. Never a payload or a credential. */
struct rts_log_field {
	const char *name;
	const char *value;
};
void rts_log_fields(int prio, const char *message_id, const struct rts_log_field *fields, size_t n,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Logs at LOG_CRIT with the function name and exits with status 1. For start-up failures
 * and protocol violations only. */
void rts_fatal(const char *func, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

#define log_debug(...) rts_log(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) rts_log(LOG_INFO, __VA_ARGS__)
#define log_notice(...) rts_log(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) rts_log(LOG_WARNING, __VA_ARGS__)
#define log_error(...) rts_log(LOG_ERR, __VA_ARGS__)
#define log_error_errno(err, ...) rts_log_errno(LOG_ERR, (err), __VA_ARGS__)
#define log_warning_errno(err, ...) rts_log_errno(LOG_WARNING, (err), __VA_ARGS__)
#define fatal_f(...) rts_fatal(__func__, __VA_ARGS__)

#endif
