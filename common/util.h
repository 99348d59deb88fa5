/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers shared by every program: cleanup attributes, ownership transfer, bounds.
 *
 * Error convention (see HACKING.md): functions return 0 or a negative errno value and
 * the caller at the boundary logs it; fatal() is kept for start-up failures and protocol
 * violations. */
#ifndef RTS_UTIL_H
#define RTS_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RTS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void rts_freep(void *p) { free(*(void **)p); }
static inline void rts_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void rts_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
static inline void rts_strvfreep(char ***v)
{
	if (*v) {
		for (char **p = *v; *p; p++)
			free(*p);
		free(*v);
	}
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define cleanup_free _cleanup_(rts_freep)
#define cleanup_close _cleanup_(rts_closep)
#define cleanup_fclose _cleanup_(rts_fclosep)
#define cleanup_strv _cleanup_(rts_strvfreep)

/* Hand a pointer or fd to a new owner and leave the old variable empty, so the cleanup
 * attribute of the old owner does nothing. */
#define steal_pointer(pp) ({ __typeof__(*(pp)) _p = *(pp); *(pp) = NULL; _p; })
#define steal_fd(pfd) ({ int _fd = *(pfd); *(pfd) = -1; _fd; })

/* Allocation failure is not an error we can handle meaningfully in a daemon; these abort. */
void *rts_xmalloc(size_t n);
void *rts_xcalloc(size_t n, size_t size);
void *rts_xrealloc(void *p, size_t n);
char *rts_xstrdup(const char *s);
char *rts_xstrndup(const char *s, size_t n);
char *rts_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* strv: NULL-terminated arrays of heap strings. */
size_t rts_strv_len(char *const *v);
/* A deep copy (caller frees with rts_strv_free()). */
char **rts_strv_dup(char *const *v);
void rts_strv_free(char **v);

/* Write all of buf to fd, retrying on EINTR and short writes. Returns 0 or -errno. */
int rts_write_all(int fd, const void *buf, size_t len);

/* Monotonic clock in milliseconds. */
uint64_t rts_now_ms(void);

/* Format t as local time in the process's current time zone (TZ, which the daemons set
 * once at start-up to the config's time zone) as RFC 3339 "YYYY-MM-DDTHH:MM:SS+HH:MM", the
 * "now" a worker is told. out must hold at least 32 bytes. Returns 0 or -EINVAL
 * (localtime_r or strftime failed, or outlen is too small). */
int rts_format_local_time(time_t t, char *out, size_t outlen);

/* Fill out[0..2*n] with n random bytes as lowercase hex plus a NUL. Uses getrandom(2).
 * Returns 0 or -errno. */
int rts_random_hex(char *out, size_t n_bytes);

/* True when s is a valid UTF-8 string of exactly len bytes with no NUL. */
bool rts_utf8_valid(const char *s, size_t len);

/* Decode the UTF-8 sequence at the start of the len bytes at s into *cp. Returns its
 * length in bytes (1 to 4), or 0 when len is 0 or the bytes are not a valid sequence (a
 * stray or missing continuation byte, an overlong form, a surrogate, past U+10FFFF). */
size_t rts_utf8_decode(const char *s, size_t len, uint32_t *cp);

/* True for a code point that is invisible or rearranges text around it, so that a name
 * holding it can show as another name: the C0 controls and DEL, the C1 controls
 * (U+0080-U+009F), and the format characters and separators U+00AD, U+061C, U+180E,
 * U+200B-U+200F, U+2028-U+202E, U+2060-U+206F, U+FEFF, U+FFF9-U+FFFB and the tags
 * U+E0000-U+E007F. (A reply file name "\u202egnp.exe" shows as "exe.png".) */
bool rts_code_point_hidden(uint32_t cp);

#endif
