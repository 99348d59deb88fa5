/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 as the rich mode's JSON carries bytes (images, attachments, reply files): the
 * standard alphabet of RFC 4648 section 4, padded to a multiple of four, no line breaks,
 * no whitespace. Checking is ours (a few lines, strict); encoding and decoding are
 * libcrypto's EVP_EncodeBlock/EVP_DecodeBlock, run only on text that passed the check. */
#ifndef RTS_BASE64_H
#define RTS_BASE64_H

#include <stddef.h>

/* The number of bytes the n characters at s decode to, or SIZE_MAX when they are not
 * strict base64 (a length that is not a multiple of four, a character outside the
 * alphabet, '=' anywhere but in the last two places). */
size_t rts_base64_decoded_len(const char *s, size_t n);

/* Decode the n characters at s (strict base64) into out, which holds cap bytes. Returns
 * the number of bytes written, -EINVAL when s is not strict base64, or -ENOBUFS when the
 * bytes do not fit (nothing useful is in out then). */
long rts_base64_decode(const char *s, size_t n, void *out, size_t cap);

/* Decode only the first bytes of s, at most cap (cap <= 48): for a file's signature
 * without decoding all of it. s must have passed rts_base64_decoded_len(). Returns the
 * number of bytes written. */
size_t rts_base64_decode_prefix(const char *s, size_t n, unsigned char *out, size_t cap);

/* len bytes as base64 in a new NUL-terminated string (caller frees); *out_len (when not
 * NULL) its length. Aborts on allocation failure. */
char *rts_base64_encode(const void *data, size_t len, size_t *out_len);

#endif
