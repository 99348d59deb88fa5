/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

static const char *log_ident = "roundtable-sandbox";
static int log_max_prio = LOG_INFO;
static bool log_to_journal;

static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void rts_log_init(const char *ident)
{
	log_ident = ident;
	log_to_journal = stderr_is_journal();
	const char *lvl = getenv("RTS_LOG_LEVEL");
	if (lvl && strcmp(lvl, "debug") == 0)
		log_max_prio = LOG_DEBUG;
}

void rts_log_set_max_priority(int max_prio)
{
	log_max_prio = max_prio;
}

static const char *prio_name(int prio)
{
	switch (prio) {
	case LOG_EMERG:
	case LOG_ALERT:
	case LOG_CRIT:
		return "fatal";
	case LOG_ERR:
		return "error";
	case LOG_WARNING:
		return "warning";
	case LOG_NOTICE:
		return "notice";
	case LOG_INFO:
		return "info";
	default:
		return "debug";
	}
}

/* Control characters are replaced so a log line stays one line whatever it quotes. */
static void sanitize(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

/* One journal entry with only the fields that are present, so that a match such as
 * `journalctl RTS_OUTCOME=timeout` finds turn lines and nothing else. Returns 0 or the
 * negative errno of sd_journal_sendv() (the caller then falls back to stderr). */
static int emit_journal(int prio, const char *turn_id, const char *channel_hash, const char *outcome,
			uint64_t duration_ms, const char *msg)
{
	char *fields[7];
	size_t n = 0;
	fields[n++] = rts_xasprintf("MESSAGE=%s", msg);
	fields[n++] = rts_xasprintf("PRIORITY=%d", prio);
	fields[n++] = rts_xasprintf("SYSLOG_IDENTIFIER=%s", log_ident);
	if (turn_id)
		fields[n++] = rts_xasprintf("RTS_TURN_ID=%s", turn_id);
	if (channel_hash)
		fields[n++] = rts_xasprintf("RTS_CHANNEL_HASH=%s", channel_hash);
	if (outcome)
		fields[n++] = rts_xasprintf("RTS_OUTCOME=%s", outcome);
	if (duration_ms)
		fields[n++] = rts_xasprintf("RTS_DURATION_MS=%" PRIu64, duration_ms);
	struct iovec iov[RTS_ARRAY_SIZE(fields)];
	for (size_t i = 0; i < n; i++)
		iov[i] = (struct iovec){.iov_base = fields[i], .iov_len = strlen(fields[i])};
	int r = sd_journal_sendv(iov, (int)n);
	for (size_t i = 0; i < n; i++)
		free(fields[i]);
	return r;
}

static void emit(int prio, const char *turn_id, const char *channel_hash, const char *outcome,
		 uint64_t duration_ms, const char *msg)
{
	if (log_to_journal && emit_journal(prio, turn_id, channel_hash, outcome, duration_ms, msg) >= 0)
		return;
	char extra[160] = "";
	/* Like the journal's RTS_DURATION_MS, ms= only when there is a duration. */
	char ms[32] = "";
	if (duration_ms)
		snprintf(ms, sizeof(ms), " ms=%" PRIu64, duration_ms);
	if (turn_id || channel_hash || outcome)
		snprintf(extra, sizeof(extra), " [turn=%s channel=%.12s outcome=%s%s]", turn_id ? turn_id : "-",
			 channel_hash ? channel_hash : "-", outcome ? outcome : "-", ms);
	fprintf(stderr, "%s: %s: %s%s\n", log_ident, prio_name(prio), msg, extra);
}

/* fmt is the callers' printf format (checked where they are called), ap its arguments;
 * the attribute tells clang's -Wformat-nonliteral so. */
__attribute__((format(printf, 6, 0))) static void vlog_full(int prio, const char *turn_id, const char *channel_hash,
							     const char *outcome, uint64_t duration_ms,
							     const char *fmt, va_list ap)
{
	if (prio > log_max_prio)
		return;
	/* Room for an upstream error body cut to 2,000 characters (brokerd's rich mode). */
	char buf[4096];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	sanitize(buf);
	emit(prio, turn_id, channel_hash, outcome, duration_ms, buf);
}

void rts_log(int prio, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	vlog_full(prio, NULL, NULL, NULL, 0, fmt, ap);
	va_end(ap);
	errno = saved;
}

int rts_log_errno(int prio, int err, const char *fmt, ...)
{
	int e = err < 0 ? -err : err;
	va_list ap;
	errno = e;
	va_start(ap, fmt);
	vlog_full(prio, NULL, NULL, NULL, 0, fmt, ap);
	va_end(ap);
	errno = e;
	return -e;
}

void rts_log_turn(int prio, const char *turn_id, const char *channel_hash, const char *outcome,
		  uint64_t duration_ms, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	vlog_full(prio, turn_id, channel_hash, outcome, duration_ms, fmt, ap);
	va_end(ap);
	errno = saved;
}

#define FIELDS_MAX 16u

static void field_value(char *dst, size_t dst_len, const char *v)
{
	snprintf(dst, dst_len, "%s", v ? v : "");
	for (char *p = dst; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			*p = '?';
}

void rts_log_fields(int prio, const char *message_id, const struct rts_log_field *fields, size_t n,
		    const char *fmt, ...)
{
	if (prio > log_max_prio)
		return;
	int saved = errno;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sanitize(msg);
	if (n > FIELDS_MAX)
		n = FIELDS_MAX;
	char values[FIELDS_MAX][128];
	for (size_t i = 0; i < n; i++)
		field_value(values[i], sizeof(values[i]), fields[i].value);
	if (log_to_journal) {
		char *lines[FIELDS_MAX + 4];
		size_t k = 0;
		lines[k++] = rts_xasprintf("MESSAGE=%s", msg);
		lines[k++] = rts_xasprintf("PRIORITY=%d", prio);
		lines[k++] = rts_xasprintf("SYSLOG_IDENTIFIER=%s", log_ident);
		if (message_id)
			lines[k++] = rts_xasprintf("MESSAGE_ID=%s", message_id);
		for (size_t i = 0; i < n; i++)
			lines[k++] = rts_xasprintf("%s=%s", fields[i].name, values[i]);
		struct iovec iov[RTS_ARRAY_SIZE(lines)];
		for (size_t i = 0; i < k; i++)
			iov[i] = (struct iovec){.iov_base = lines[i], .iov_len = strlen(lines[i])};
		int r = sd_journal_sendv(iov, (int)k);
		for (size_t i = 0; i < k; i++)
			free(lines[i]);
		if (r >= 0) {
			errno = saved;
			return;
		}
	}
	char extra[FIELDS_MAX * 160 + 64];
	size_t len = 0;
	extra[0] = '\0';
	if (message_id)
		len += (size_t)snprintf(extra + len, sizeof(extra) - len, " MESSAGE_ID=%s", message_id);
	for (size_t i = 0; i < n && len < sizeof(extra); i++)
		len += (size_t)snprintf(extra + len, sizeof(extra) - len, " %s=%s", fields[i].name, values[i]);
	fprintf(stderr, "%s: %s: %s {%s}\n", log_ident, prio_name(prio), msg, extra[0] ? extra + 1 : "");
	errno = saved;
}

void rts_fatal(const char *func, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	rts_log(LOG_CRIT, "%s: %s", func, buf);
	exit(1);
}
