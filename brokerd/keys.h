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

struct brokerd_reflect_run;

/* True when the len bytes at key are a usable bearer credential: 1..BROKERD_KEY_MAX bytes,
 * printable ASCII only (no whitespace, no control characters, nothing a header line could
 * be split on). */
bool brokerd_key_valid(const char *key, size_t len);

/* Read the credential named by src for the turn bound in b:
 *   credential: $CREDENTIALS_DIRECTORY/NAME (no symlinks), one trailing newline stripped;
 *   file:       the file, one trailing newline stripped (DESIGN.md "Pinned details"),
 *               never through a symbolic link as its last component (host tools' sandbox
 *               hides the directory the config names, not a link's target): a link is
 *               refused with a log line naming the file;
 *   env:        the variable's value;
 *   command:    argv run by brokerd's launcher in the key commands' sandbox
 *               (brokerd/toolbox.h; src must be a key source of the config the launcher
 *               was started with) with PATH=/usr/bin:/bin only, stdin
 *               {"channel","speaker":{"id","name","principalId"}} from b, stdout (at most
 *               BROKERD_KEY_MAX bytes, one trailing newline stripped) within
 *               BROKERD_KEY_COMMAND_TIMEOUT_MS and cancel; empty output or a non-zero exit
 *               means no key; its stderr is discarded.
 * Returns 0 with *key (len bytes plus a NUL; free with brokerd_key_free) or -ENOKEY when
 * there is no usable key, -ECANCELED / -ETIMEDOUT when cancel stopped a key command. The
 * caller logs; the key is never logged. */
int brokerd_key_read(const struct rts_key_source *src, const struct brokerd_binding *b,
		     const struct brokerd_cancel *cancel, char **key, size_t *len);

/* brokerd_key_read() with who (when not NULL) as the command form's stdin instead of the
 * binding's {"channel","speaker"}: a precheck's token command gets {"channel","precheck":
 * {"target","tier"}} (brokerd/precheck.c), since a precheck has no speaker. */
int brokerd_key_read_for(const struct rts_key_source *src, const struct brokerd_binding *b, json_object *who,
			 const struct brokerd_cancel *cancel, char **key, size_t *len);

/* Start-up: refuse a config whose {"file"} key source (any of rts_config_key_source())
 * is a symbolic link now, as every read would. A file that is missing now is not refused
 * (it may appear later). Returns 0, or -ELOOP with a message naming the config key and the
 * fix in err (errlen bytes). */
int brokerd_key_files_check(const struct rts_config *cfg, char *err, size_t errlen);

/* Wipe and free a key from brokerd_key_read. NULL is fine. */
void brokerd_key_free(char *key, size_t len);

/* The JSON a key command or host tool gets to identify the turn: {"channel", "speaker":
 * {"id", "name", "principalId"}} from b (principalId null when b has none). Caller owns the
 * reference. */
json_object *brokerd_binding_json(const struct brokerd_binding *b);

/* The credentials of one turn, kept as reflection needles (reflect.h) so that an answer
 * (a model answer, an MCP answer, a host tool's output) that echoes any of them is
 * refused. Keys are filed by the source they were read from: per source the last
 * BROKERD_KEYRING_PER_SOURCE distinct keys (a key read again in the turn, or rotated). The
 * sources are the configuration's, which outlives every turn. Thread-safe. */
#define BROKERD_KEYRING_PER_SOURCE 2u
struct brokerd_keyring *brokerd_keyring_new(void);
void brokerd_keyring_free(struct brokerd_keyring *k);

/* Remember key (len bytes, copied) as read from src. Invalid keys are ignored. */
void brokerd_keyring_add(struct brokerd_keyring *k, const struct rts_key_source *src, const char *key, size_t len);

/* Before a tool or MCP call forwards anything: make the filter know the turn's
 * credentials, so even the turn's first answer is checked against them.
 *   The model key (cfg->api_key) is read now, unless it comes from a command that already
 *   gave a key in this turn (a /model call runs the command for every call anyway; here
 *   it runs at most until it gave one key). Fails closed: returns -ENOKEY when no model
 *   key was read in this turn and none can be read now, or -ECANCELED / -ETIMEDOUT
 *   when cancel stopped the key command; the caller refuses the call.
 *   Each MCP server's apiKey is read too, a command at most once per turn (a server may
 *   be meant to have no key for this speaker); failures only leave it out.
 * Returns 0 otherwise. Logs nothing; the caller logs. */
int brokerd_keyring_prime(struct brokerd_keyring *k, const struct rts_config *cfg, const struct brokerd_binding *b,
			  const struct brokerd_cancel *cancel);

/* brokerd_keyring_prime() with the model key read from model_src instead of cfg->api_key
 * (a rich turn's oauthToken), and, when scoped, only the n MCP servers at the indexes
 * mcp[] into cfg->mcp (a rich profile's). */
int brokerd_keyring_prime_scoped(struct brokerd_keyring *k, const struct rts_config *cfg,
				 const struct rts_key_source *model_src, bool scoped, const size_t *mcp, size_t n,
				 const struct brokerd_binding *b, const struct brokerd_cancel *cancel);

/* For a log line that must quote upstream text (seed, "Host options and hooks": upstream
 * failures are logged with the error body cut to 2,000 characters with credentials
 * masked): a copy of the len bytes at text with every remembered key replaced by
 * "[masked]", control bytes by spaces and bytes of invalid UTF-8 by '?', cut to max_chars
 * characters ("..." appended when cut). When the text still holds a key in an encoded form
 * (reflect.h), the whole text is withheld instead. Caller frees. */
char *brokerd_keyring_mask(struct brokerd_keyring *k, const char *text, size_t len, size_t max_chars);

/* The length of the longest key the keyring holds (0 when it holds none): what a filter
 * reading a stream must keep back to see a key split across its pieces. */
size_t brokerd_keyring_longest(struct brokerd_keyring *k);

/* brokerd_keyring_prime() for call's turn (call->model_key and call's MCP scope when set),
 * logged: BROKERD_OK, or BROKERD_UNAVAILABLE (with a "no_key" line when no model key can
 * be read) when the call must be refused. */
enum brokerd_result brokerd_keyring_prime_call(struct brokerd_call *call);

/* True when text (len bytes) or the decoded strings of o (may be NULL) contain any
 * remembered key in any form reflect.h lists. */
bool brokerd_keyring_reflected(struct brokerd_keyring *k, const char *text, size_t len, json_object *o);

/* brokerd_reflect_run_feed() against every remembered key: the len bytes at text appended
 * to run (caller owns it, brokerd_reflect_run_new()); true when the running text holds a
 * key. final as there. */
bool brokerd_keyring_run(struct brokerd_keyring *k, struct brokerd_reflect_run *run, const char *text, size_t len,
			 bool final);

#endif
