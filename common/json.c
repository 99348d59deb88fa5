/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "common/json.h"
#include "common/util.h"

int rts_json_parse(const char *buf, size_t len, int max_depth, json_object **out, const char **why)
{
	return rts_json_parse_at(buf, len, max_depth, out, why, NULL);
}

int rts_json_parse_at(const char *buf, size_t len, int max_depth, json_object **out, const char **why,
		      size_t *err_offset)
{
	*out = NULL;
	if (err_offset)
		*err_offset = 0;
	if (len > INT32_MAX) {
		*why = "document too large";
		return -EINVAL;
	}
	const char *nul = memchr(buf, '\0', len);
	if (nul) {
		*why = "NUL byte in JSON text";
		if (err_offset)
			*err_offset = (size_t)(nul - buf);
		return -EINVAL;
	}
	json_tokener *tok = json_tokener_new_ex(max_depth);
	if (!tok)
		abort();
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	json_object *o = json_tokener_parse_ex(tok, buf, (int)len);
	enum json_tokener_error e = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	if (!o && e == json_tokener_continue && end == len) {
		/* A bare number at the very end needs a terminator to be complete. */
		o = json_tokener_parse_ex(tok, "", 1);
		e = json_tokener_get_error(tok);
		end = len;
	}
	if (!o || e != json_tokener_success) {
		*why = e == json_tokener_error_depth ? "nesting too deep"
		       : e == json_tokener_continue  ? "truncated JSON text"
						     : "invalid JSON text";
		if (err_offset)
			*err_offset = end;
		json_tokener_free(tok);
		if (o)
			json_object_put(o);
		return -EINVAL;
	}
	json_tokener_free(tok);
	for (size_t i = end; i < len; i++) {
		char c = buf[i];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			json_object_put(o);
			*why = "data after the JSON value";
			if (err_offset)
				*err_offset = i;
			return -EINVAL;
		}
	}
	*out = o;
	return 0;
}

int rts_json_read_bytes(const char *path, size_t max_bytes, char **out_buf, size_t *out_len, char *err,
			size_t errlen)
{
	*out_buf = NULL;
	*out_len = 0;
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
		return -e;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		return -EINVAL;
	}
	if ((size_t)st.st_size > max_bytes) {
		snprintf(err, errlen, "%s: larger than %zu bytes", path, max_bytes);
		return -EFBIG;
	}
	cleanup_free char *buf = rts_xmalloc(max_bytes + 1);
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, max_bytes + 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			snprintf(err, errlen, "%s: read failed: %s", path, strerror(e));
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max_bytes) {
			snprintf(err, errlen, "%s: larger than %zu bytes", path, max_bytes);
			return -EFBIG;
		}
	}
	buf[len] = '\0';
	*out_buf = steal_pointer(&buf);
	*out_len = len;
	return 0;
}

char *rts_json_dump(json_object *o)
{
	return rts_xstrdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
}

size_t rts_json_dump_len(json_object *o)
{
	size_t len = 0;
	json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	return len;
}

size_t rts_json_byte_len(unsigned char c)
{
	switch (c) {
	case '"':
	case '\\':
	case '/':
	case '\b':
	case '\f':
	case '\n':
	case '\r':
	case '\t':
		return 2;
	default:
		return c < 0x20 ? 6 : 1; /* \u00XX */
	}
}

size_t rts_json_string_len(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += rts_json_byte_len((unsigned char)s[i]);
	return n;
}

json_object *rts_json_get(json_object *o, const char *key)
{
	json_object *v = NULL;
	if (!o || !json_object_is_type(o, json_type_object))
		return NULL;
	if (!json_object_object_get_ex(o, key, &v))
		return NULL;
	return v;
}

const char *rts_json_get_string(json_object *o, const char *key)
{
	json_object *v = rts_json_get(o, key);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}
