/* SPDX-License-Identifier: Apache-2.0 */
/* Sealed memfds: how a payload too big for a daemon-link packet travels with the message it
 * belongs to (a rich turn's input, its reply, an attachment's bytes; common/proto.h).
 *
 * The sender writes the bytes into a memfd_create(MFD_CLOEXEC | MFD_ALLOW_SEALING) file and
 * adds every seal that freezes it (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE and F_SEAL_SEAL)
 * before passing the fd on. The receiver never trusts the sender to have done so: it checks
 * that the fd is a regular file carrying all four seals and that its size is within the
 * bound of the message, and only then maps or reads it. Once sealed, nobody (the sender
 * included, through any fd or mapping) can change the bytes or the size, so what the
 * receiver checked is what it reads: no race between a check and a later read, and no
 * SIGBUS from a file shrunk under a mapping.
 *
 * The writer uses write(2) only (no ftruncate, no shared writable mapping): brokerd's
 * seccomp filter refuses ftruncate, and F_SEAL_WRITE cannot be added while a writable
 * shared mapping exists. Nothing here logs. */
#ifndef RTS_MEMFD_H
#define RTS_MEMFD_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>

/* Every seal a received memfd must carry. */
#define RTS_MEMFD_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)

/* An unsealed memfd being written. */
struct rts_memfd_writer {
	int fd;	    /* -1 when not open */
	size_t len; /* bytes written */
	size_t max; /* more is -EFBIG */
};

#define RTS_MEMFD_WRITER_INIT {.fd = -1, .len = 0, .max = 0}

/* Open a new memfd named name (shown in /proc, for debugging; at most 249 bytes) that will
 * take at most max bytes. Returns 0 or -errno (from memfd_create). */
int rts_memfd_writer_open(struct rts_memfd_writer *w, const char *name, size_t max);

/* Append len bytes. Returns 0, -EFBIG when the total would pass max (nothing is written
 * then), or -errno from write(2). */
int rts_memfd_writer_write(struct rts_memfd_writer *w, const void *data, size_t len);

/* Seal the memfd and hand it over: returns the fd (the caller owns it; the writer is
 * closed) or -errno (the writer is closed too). */
int rts_memfd_writer_seal(struct rts_memfd_writer *w);

/* Close an unfinished writer (nothing is sent). Safe on a closed one. */
void rts_memfd_writer_close(struct rts_memfd_writer *w);

/* A sealed memfd holding the len bytes at data (len may be 0: an empty payload). Returns
 * the fd or -errno. */
int rts_memfd_from_buffer(const char *name, const void *data, size_t len);

/* Check a received fd: a regular file with every seal of RTS_MEMFD_SEALS (-EPERM
 * otherwise: not a memfd, or a seal missing) and at most max bytes (-EFBIG). Returns 0 with
 * *size set. */
int rts_memfd_check(int fd, size_t max, size_t *size);

/* rts_memfd_check(), then map it read-only (MAP_PRIVATE). Returns 0 with *data and *len
 * (an empty memfd gives data NULL and len 0), to be released with rts_memfd_unmap(); or
 * what the check returned, or -errno from mmap. The fd may be closed after this. */
int rts_memfd_map(int fd, size_t max, const void **data, size_t *len);
void rts_memfd_unmap(const void *data, size_t len);

/* rts_memfd_check(), then read it whole into a new buffer of *len bytes plus a NUL
 * (caller frees). Returns 0, what the check returned, or -EIO when the file did not hold
 * the bytes its size promised. */
int rts_memfd_read(int fd, size_t max, char **data, size_t *len);

#endif
