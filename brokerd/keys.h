/* SPDX-License-Identifier: Apache-2.0 */
/* Real credentials: read from their configured source at every call, and remembered only
 * as reflection-filter needles for the rest of the turn.
 *
 * DESIGN.md section 5 (apiKey): read on every request; a missing key fails closed and is
 * never replaced by anything else. A key never appears in a log line or an error. */
#ifndef BROKERD_KEYS_H
#define BROKERD_KEYS_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>

#include "brokerd/brokerd.h"
#include "common/conf.h"

/* True when the len bytes at key are a usable bearer credential: 1..BROKERD_KEY_MAX bytes,
 * printable ASCII only (no whitespace, no control characters, nothing a header line could
 * be split on). */
bool brokerd_key_valid(const char *key, size_t len);

/* Read the credential named by src for the turn bound in b:
 *   credential: $CREDENTIALS_DIRECTORY/NAME (no symlinks), one trailing newline stripped;
 *   file:       the file, one trailing newline stripped (DESIGN.md "Pinned details");
 *   env:        the variable's value;
 *   command:    argv run in a fresh process group with PATH=/usr/bin:/bin only, stdin
 *               {"channel","speaker":{"id","name","principalId"}} from b, stdout (at most
 *               BROKERD_KEY_MAX bytes, one trailing newline stripped) within
 *               BROKERD_KEY_COMMAND_TIMEOUT_MS and cancel; empty output or a non-zero exit
 *               means no key; its stderr is discarded.
 * Returns 0 with *key (len bytes plus a NUL; free with brokerd_key_free) or -ENOKEY when
 * there is no usable key, -ECANCELED / -ETIMEDOUT when cancel stopped a key command. The
 * caller logs; the key is never logged. */
int brokerd_key_read(const struct rts_key_source *src, const struct brokerd_binding *b,
		     const struct brokerd_cancel *cancel, char **key, size_t *len);

/* Wipe and free a key from brokerd_key_read. NULL is fine. */
void brokerd_key_free(char *key, size_t len);

/* The JSON a key command or host tool gets to identify the turn: {"channel", "speaker":
 * {"id", "name", "principalId"}} from b (principalId null when b has none). Caller owns the
 * reference. */
json_object *brokerd_binding_json(const struct brokerd_binding *b);

/* The credentials one turn has used, kept as reflection needles so a later answer (a tool
 * result, an MCP answer) that echoes any of them is refused. Thread-safe. */
struct brokerd_keyring *brokerd_keyring_new(void);
void brokerd_keyring_free(struct brokerd_keyring *k);
/* Remember key (len bytes). Keeps at most 8 distinct keys, dropping the oldest. */
void brokerd_keyring_add(struct brokerd_keyring *k, const char *key, size_t len);
/* Read the credential of src and remember it, when reading has no side effect (anything
 * but a key command). A tool or MCP call made before any model call is then still checked
 * against the model key. Failures are silent: this only widens the filter. */
void brokerd_keyring_prime(struct brokerd_keyring *k, const struct rts_key_source *src,
			   const struct brokerd_binding *b, const struct brokerd_cancel *cancel);
/* True when text (len bytes) or the decoded strings of o (may be NULL) contain any
 * remembered key in any form brokerd_reflect_new() knows. */
bool brokerd_keyring_reflected(struct brokerd_keyring *k, const char *text, size_t len, json_object *o);

#endif
