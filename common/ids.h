/* SPDX-License-Identifier: Apache-2.0 */
/* Names derived from configuration and channel keys. */
#ifndef RTS_IDS_H
#define RTS_IDS_H

#include <stdbool.h>
#include <stddef.h>

#define RTS_HASH_HEX_LEN 64u
#define RTS_INSTALLATION_ID_LEN 12u

/* out (65 bytes) receives the lowercase hex sha256 of the len bytes at data. */
void rts_sha256_hex(const void *data, size_t len, char out[RTS_HASH_HEX_LEN + 1]);

/* A channel's workspace directory name: hex sha256 of the channel key's bytes. Channel keys
 * are opaque and never interpreted as paths (seed: "Channel keys are hashed for workspace
 * names and are not interpreted as paths"). */
void rts_channel_hash(const char *channel, char out[RTS_HASH_HEX_LEN + 1]);

/* The installation id: the first 12 hex digits of the sha256 of the absolute stateFile
 * path, so every daemon with the same config derives the same one (DESIGN.md section 4). */
void rts_installation_id(const char *state_file, char out[RTS_INSTALLATION_ID_LEN + 1]);

/* A new random turn id: 16 lowercase hex digits. Returns 0 or -errno. */
int rts_turn_id_new(char out[17]);

/* True when s is exactly 16 lowercase hex digits. */
bool rts_turn_id_valid(const char *s);

/* True when s (NULL: false) is exactly len lowercase hex digits: channel hashes
 * (RTS_HASH_HEX_LEN), installation ids, their prefixes in names. */
bool rts_hex_valid(const char *s, size_t len);

/* Container name for a turn: "roundtable-sandbox-<installation id>-<turn id>" (newly
 * allocated). */
char *rts_container_name(const char *installation_id, const char *turn_id);

/* A Docker image reference as the config's "image" accepts it: [a-z0-9][A-Za-z0-9._/:@-]*,
 * at most RTS_IMAGE_MAX bytes, so it never reads as an option to docker. The config
 * loader, runnerd's docker arguments and the CLI's image build all ask this. */
bool rts_image_ref_ok(const char *s);

#define RTS_CONTAINER_PREFIX "roundtable-sandbox-"
#define RTS_LABEL_INSTALLATION "io.roundtable-sandbox.installation"
#define RTS_LABEL_CHANNEL "io.roundtable-sandbox.channel"
/* On a warm spare's container (value "1"): started before any turn claimed it. */
#define RTS_LABEL_SPARE "io.roundtable-sandbox.spare"

#endif
