/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>

#include "brokerd/exec.h"
#include "brokerd/keys.h"
#include "brokerd/reflect.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"

#define KEYRING_MAX 8u

bool brokerd_key_valid(const char *key, size_t len)
{
	if (!key || len == 0 || len > BROKERD_KEY_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)key[i];
		if (c <= 0x20 || c >= 0x7f)
			return false;
	}
	return true;
}

void brokerd_key_free(char *key, size_t len)
{
	if (!key)
		return;
	explicit_bzero(key, len);
	free(key);
}

/* Take buf (len bytes, room for a NUL) as the key after stripping one trailing newline. */
static int finish(char *buf, size_t len, bool strip_newline, char **key, size_t *key_len)
{
	if (strip_newline && len > 0 && buf[len - 1] == '\n')
		len--;
	buf[len] = '\0';
	if (!brokerd_key_valid(buf, len)) {
		brokerd_key_free(buf, len + 1);
		return -ENOKEY;
	}
	*key = buf;
	*key_len = len;
	return 0;
}

static int read_key_file(int dirfd, const char *path, int extra_flags, char **key, size_t *key_len)
{
	/* O_NONBLOCK: a FIFO planted at the path must not hang the call. */
	cleanup_close int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | extra_flags);
	if (fd < 0)
		return -ENOKEY;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)BROKERD_KEY_MAX + 1)
		return -ENOKEY;
	char *buf = rts_xmalloc(BROKERD_KEY_MAX + 2);
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, BROKERD_KEY_MAX + 2 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || len + (size_t)n > BROKERD_KEY_MAX + 1) {
			brokerd_key_free(buf, BROKERD_KEY_MAX + 2);
			return -ENOKEY;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	return finish(buf, len, true, key, key_len);
}

json_object *brokerd_binding_json(const struct brokerd_binding *b)
{
	json_object *speaker = json_object_new_object();
	json_object_object_add(speaker, "id", json_object_new_string(b->speaker_id));
	json_object_object_add(speaker, "name", json_object_new_string(b->speaker_name));
	json_object_object_add(speaker, "principalId",
			       b->principal_id[0] ? json_object_new_string(b->principal_id) : NULL);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "channel", json_object_new_string(b->channel));
	json_object_object_add(o, "speaker", speaker);
	return o;
}

static int read_key_command(char *const *argv, const struct brokerd_binding *b, const struct brokerd_cancel *cancel,
			    char **key, size_t *key_len)
{
	cleanup_json json_object *in = brokerd_binding_json(b);
	cleanup_free char *input = rts_json_dump(in);
	struct brokerd_exec e = {
		.argv = argv,
		.input = input,
		.input_len = strlen(input),
		.max_output = BROKERD_KEY_MAX + 1,
		.cancel = *cancel,
		/* A credential helper's diagnostics may quote the credential. */
		.stderr_label = NULL,
		.turn_id = b->turn_id,
	};
	uint64_t limit = rts_now_ms() + BROKERD_KEY_COMMAND_TIMEOUT_MS;
	if (limit < e.cancel.deadline_ms)
		e.cancel.deadline_ms = limit;
	struct brokerd_exec_result res;
	int r = brokerd_exec_run(&e, &res);
	if (r == -ECANCELED || r == -ETIMEDOUT)
		return r;
	if (r < 0)
		return -ENOKEY;
	if (res.exit_status != 0) {
		brokerd_key_free(res.output, res.len);
		return -ENOKEY;
	}
	/* res.output has room for the NUL finish() writes. */
	return finish(res.output, res.len, true, key, key_len);
}

int brokerd_key_read(const struct rts_key_source *src, const struct brokerd_binding *b,
		     const struct brokerd_cancel *cancel, char **key, size_t *len)
{
	*key = NULL;
	*len = 0;
	switch (src->kind) {
	case RTS_KEY_CREDENTIAL: {
		const char *dir = getenv("CREDENTIALS_DIRECTORY");
		if (!dir || dir[0] != '/')
			return -ENOKEY;
		cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return -ENOKEY;
		/* The name is [A-Za-z0-9._-] and not . or .. (config), so it stays in dir. */
		return read_key_file(dfd, src->value, O_NOFOLLOW, key, len);
	}
	case RTS_KEY_FILE:
		return read_key_file(AT_FDCWD, src->value, 0, key, len);
	case RTS_KEY_ENV: {
		const char *v = getenv(src->value);
		if (!v)
			return -ENOKEY;
		size_t n = strnlen(v, BROKERD_KEY_MAX + 1);
		char *buf = rts_xmalloc(n + 1);
		memcpy(buf, v, n);
		return finish(buf, n, false, key, len);
	}
	case RTS_KEY_COMMAND:
		return read_key_command(src->argv, b, cancel, key, len);
	}
	return -ENOKEY;
}

struct brokerd_keyring {
	pthread_mutex_t lock;
	struct brokerd_reflect *keys[KEYRING_MAX];
	char *raw[KEYRING_MAX]; /* only to recognise a key seen before; wiped on free */
	size_t raw_len[KEYRING_MAX];
	size_t n;
};

struct brokerd_keyring *brokerd_keyring_new(void)
{
	struct brokerd_keyring *k = rts_xcalloc(1, sizeof(*k));
	pthread_mutex_init(&k->lock, NULL);
	return k;
}

void brokerd_keyring_free(struct brokerd_keyring *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n; i++) {
		brokerd_reflect_free(k->keys[i]);
		brokerd_key_free(k->raw[i], k->raw_len[i]);
	}
	pthread_mutex_destroy(&k->lock);
	free(k);
}

void brokerd_keyring_add(struct brokerd_keyring *k, const char *key, size_t len)
{
	if (!brokerd_key_valid(key, len))
		return;
	pthread_mutex_lock(&k->lock);
	for (size_t i = 0; i < k->n; i++)
		if (k->raw_len[i] == len && memcmp(k->raw[i], key, len) == 0) {
			pthread_mutex_unlock(&k->lock);
			return;
		}
	if (k->n == KEYRING_MAX) {
		brokerd_reflect_free(k->keys[0]);
		brokerd_key_free(k->raw[0], k->raw_len[0]);
		memmove(&k->keys[0], &k->keys[1], (KEYRING_MAX - 1) * sizeof(k->keys[0]));
		memmove(&k->raw[0], &k->raw[1], (KEYRING_MAX - 1) * sizeof(k->raw[0]));
		memmove(&k->raw_len[0], &k->raw_len[1], (KEYRING_MAX - 1) * sizeof(k->raw_len[0]));
		k->n--;
	}
	k->keys[k->n] = brokerd_reflect_new(key, len);
	k->raw[k->n] = rts_xstrndup(key, len);
	k->raw_len[k->n] = len;
	k->n++;
	pthread_mutex_unlock(&k->lock);
}

bool brokerd_keyring_reflected(struct brokerd_keyring *k, const char *text, size_t len, json_object *o)
{
	bool hit = false;
	pthread_mutex_lock(&k->lock);
	for (size_t i = 0; !hit && i < k->n; i++)
		hit = brokerd_reflect_text(k->keys[i], text, len) || brokerd_reflect_json(k->keys[i], o);
	pthread_mutex_unlock(&k->lock);
	return hit;
}

void brokerd_keyring_prime(struct brokerd_keyring *k, const struct rts_key_source *src,
			   const struct brokerd_binding *b, const struct brokerd_cancel *cancel)
{
	if (src->kind == RTS_KEY_COMMAND)
		return;
	char *key = NULL;
	size_t len = 0;
	if (brokerd_key_read(src, b, cancel, &key, &len) == 0)
		brokerd_keyring_add(k, key, len);
	brokerd_key_free(key, len);
}
