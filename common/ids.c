/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <openssl/evp.h>

#include "common/ids.h"
#include "common/limits.h"
#include "common/util.h"

void rts_sha256_hex(const void *data, size_t len, char out[RTS_HASH_HEX_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[32];
	unsigned int mdlen = 0;
	if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		abort(); /* sha256 cannot fail short of memory exhaustion */
	for (size_t i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[RTS_HASH_HEX_LEN] = '\0';
}

void rts_channel_hash(const char *channel, char out[RTS_HASH_HEX_LEN + 1])
{
	rts_sha256_hex(channel, strlen(channel), out);
}

void rts_installation_id(const char *state_file, char out[RTS_INSTALLATION_ID_LEN + 1])
{
	char full[RTS_HASH_HEX_LEN + 1];
	rts_sha256_hex(state_file, strlen(state_file), full);
	memcpy(out, full, RTS_INSTALLATION_ID_LEN);
	out[RTS_INSTALLATION_ID_LEN] = '\0';
}

int rts_turn_id_new(char out[17])
{
	return rts_random_hex(out, 8);
}

bool rts_hex_valid(const char *s, size_t len)
{
	size_t i;
	if (!s)
		return false;
	for (i = 0; s[i]; i++)
		if (i >= len || !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return i == len;
}

bool rts_turn_id_valid(const char *s)
{
	return rts_hex_valid(s, 16);
}

char *rts_container_name(const char *installation_id, const char *turn_id)
{
	return rts_xasprintf(RTS_CONTAINER_PREFIX "%s-%s", installation_id, turn_id);
}

bool rts_image_ref_ok(const char *s)
{
	if (!s || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')) || strlen(s) > RTS_IMAGE_MAX)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
		      *p == '_' || *p == '-' || *p == '/' || *p == ':' || *p == '@'))
			return false;
	return true;
}
