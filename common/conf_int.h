/* SPDX-License-Identifier: Apache-2.0 */
/* Pieces of the config loader shared by its files (common/conf.c, the whole file, and
 * common/conf_rich.c, the "rich" key). Not for other modules: they use common/conf.h. */
#ifndef RTS_CONF_INT_H
#define RTS_CONF_INT_H

#include "common/conf.h"
#include "common/jspec.h"

/* A key source object: {"credential"|"file"|"env"|"command": ...}, exactly one of them,
 * stored as a struct rts_key_source. */
extern const struct rts_jspec rts_conf_key_source_spec;
#define KEY_SOURCE_WHAT "an object with one of credential, file, env or command"
void rts_conf_key_source_free(struct rts_key_source *k);

/* One argv string. */
extern const struct rts_jfield rts_conf_argv_item;
/* A NULL-terminated argv of 1 to 64 strings stored at offset off, then checked by chk. */
#define ARGV_FIELD(k, flags_, off, chk)                                                                                \
	{.key = (k), .types = RTS_JT_ARRAY, .flags = (flags_), .min = 1, .max = 64, .each = &rts_conf_argv_item,       \
	 .check = (chk), .store = RTS_JS_ARRAY, .at = (off), .elem_size = sizeof(char *), .items = "strings (argv)"}

/* Field rules (rts_jcheck_fn): argv[0] an absolute path; a tool or server name
 * ([a-z][a-z0-9_]{0,47}); a Docker image reference; an https:// URL; an IANA time zone
 * name. */
rts_jcheck_fn rts_conf_argv_check;
rts_jcheck_fn rts_conf_name_check;
rts_jcheck_fn rts_conf_image_check;
rts_jcheck_fn rts_conf_https_url_check;
rts_jcheck_fn rts_conf_time_zone_check;

/* The "rich" key (common/conf_rich.c): its table, its defaults (set before the walk, so a
 * key left out keeps them), the rules between it and the rest of the file (profiles name
 * existing tools and servers; the compactor's timeout; run after every key is valid), and
 * freeing it. */
extern const struct rts_jspec rts_conf_rich_spec;
void rts_conf_rich_defaults(struct rts_rich_conf *r);
bool rts_conf_rich_check(struct rts_jctx *ctx, struct rts_config *c);
void rts_conf_rich_free(struct rts_rich_conf *r);

#endif
