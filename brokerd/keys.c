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
		return errno == ELOOP && (extra_flags & O_NOFOLLOW) ? -ELOOP : -ENOKEY;
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

int brokerd_key_files_check(const struct rts_config *cfg, char *err, size_t errlen)
{
	char label[96];
	for (size_t i = 0; i < rts_config_key_sources(cfg); i++) {
		const struct rts_key_source *k = rts_config_key_source(cfg, i, label, sizeof(label));
		struct stat st;
		if (!k || k->kind != RTS_KEY_FILE || lstat(k->value, &st) < 0 || !S_ISLNK(st.st_mode))
			continue;
		snprintf(err, errlen,
			 "%s: %s.file: %s is a symbolic link; brokerd reads key files only by their own name, since "
			 "host tools could read a link's target: name the file itself",
			 cfg->path, label, k->value);
		return -ELOOP;
	}
	return 0;
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

static int read_key_command(const struct rts_key_source *src, const struct brokerd_binding *b, json_object *who,
			    const struct brokerd_cancel *cancel, char **key, size_t *key_len)
{
	cleanup_json json_object *in = who ? json_object_get(who) : brokerd_binding_json(b);
	cleanup_free char *input = rts_json_dump(in);
	struct brokerd_exec e = {
		.key = src,
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
	return brokerd_key_read_for(src, b, NULL, cancel, key, len);
}

int brokerd_key_read_for(const struct rts_key_source *src, const struct brokerd_binding *b, json_object *who,
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
		int r = read_key_file(dfd, src->value, O_NOFOLLOW, key, len);
		return r == -ELOOP ? -ENOKEY : r;
	}
	case RTS_KEY_FILE: {
		/* Never through a link: host tools' sandbox hides the key file's directory, not
		 * wherever a link points (brokerd/toolbox.h). */
		int r = read_key_file(AT_FDCWD, src->value, O_NOFOLLOW, key, len);
		if (r == -ELOOP) {
			static const char why[] = "key file %s is a symbolic link, which brokerd refuses to follow "
						  "(host tools could read its target); fix: name the file itself in the "
						  "config";
			if (b)
				rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "key_file_symlink", 0, why,
					     src->value);
			else
				log_warning(why, src->value);
			return -ENOKEY;
		}
		return r;
	}
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
		return read_key_command(src, b, who, cancel, key, len);
	}
	return -ENOKEY;
}

/* One source's keys, oldest first. */
struct keyring_source {
	const struct rts_key_source *src;
	bool tried; /* brokerd_keyring_prime() read it, or a call did */
	size_t n;
	char *raw[BROKERD_KEYRING_PER_SOURCE]; /* to recognise a key read again; wiped on free */
	size_t raw_len[BROKERD_KEYRING_PER_SOURCE];
	struct brokerd_reflect *needles[BROKERD_KEYRING_PER_SOURCE];
};

struct brokerd_keyring {
	pthread_mutex_t lock;
	struct keyring_source *sources;
	size_t n_sources;
	/* Every source's needles in one array, sources in order, each oldest first: what the
	 * filter scans. Rebuilt when a key is added, so an answer's check allocates nothing. */
	const struct brokerd_reflect **all;
	size_t n_all;
};

struct brokerd_keyring *brokerd_keyring_new(void)
{
	struct brokerd_keyring *k = rts_xcalloc(1, sizeof(*k));
	pthread_mutex_init(&k->lock, NULL);
	return k;
}

static void drop_oldest(struct keyring_source *ks)
{
	brokerd_reflect_free(ks->needles[0]);
	brokerd_key_free(ks->raw[0], ks->raw_len[0]);
	for (size_t i = 1; i < ks->n; i++) {
		ks->needles[i - 1] = ks->needles[i];
		ks->raw[i - 1] = ks->raw[i];
		ks->raw_len[i - 1] = ks->raw_len[i];
	}
	ks->n--;
}

void brokerd_keyring_free(struct brokerd_keyring *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n_sources; i++)
		while (k->sources[i].n)
			drop_oldest(&k->sources[i]);
	free(k->sources);
	free(k->all);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

/* The entry of src, created when missing. Under the lock; the pointer is valid until the
 * lock is released. */
static struct keyring_source *source_locked(struct brokerd_keyring *k, const struct rts_key_source *src)
{
	for (size_t i = 0; i < k->n_sources; i++)
		if (k->sources[i].src == src)
			return &k->sources[i];
	k->sources = rts_xrealloc(k->sources, (k->n_sources + 1) * sizeof(*k->sources));
	struct keyring_source *ks = &k->sources[k->n_sources++];
	*ks = (struct keyring_source){.src = src};
	return ks;
}

/* Rebuild k->all after the needles changed. Under the lock. */
static void flatten_locked(struct brokerd_keyring *k)
{
	size_t n = 0;
	for (size_t i = 0; i < k->n_sources; i++)
		n += k->sources[i].n;
	k->all = rts_xrealloc(k->all, (n + 1) * sizeof(*k->all));
	n = 0;
	for (size_t i = 0; i < k->n_sources; i++)
		for (size_t j = 0; j < k->sources[i].n; j++)
			k->all[n++] = k->sources[i].needles[j];
	k->n_all = n;
}

void brokerd_keyring_add(struct brokerd_keyring *k, const struct rts_key_source *src, const char *key, size_t len)
{
	if (!brokerd_key_valid(key, len))
		return;
	pthread_mutex_lock(&k->lock);
	struct keyring_source *ks = source_locked(k, src);
	ks->tried = true;
	bool known = false;
	for (size_t i = 0; i < ks->n && !known; i++)
		known = ks->raw_len[i] == len && memcmp(ks->raw[i], key, len) == 0;
	if (!known) {
		if (ks->n == BROKERD_KEYRING_PER_SOURCE)
			drop_oldest(ks);
		ks->needles[ks->n] = brokerd_reflect_new(key, len);
		ks->raw[ks->n] = rts_xstrndup(key, len);
		ks->raw_len[ks->n] = len;
		ks->n++;
		flatten_locked(k);
	}
	pthread_mutex_unlock(&k->lock);
}

bool brokerd_keyring_reflected(struct brokerd_keyring *k, const char *text, size_t len, json_object *o)
{
	pthread_mutex_lock(&k->lock);
	bool hit = brokerd_reflect_scan_text(k->all, k->n_all, text, len) ||
		   brokerd_reflect_scan_json(k->all, k->n_all, o);
	pthread_mutex_unlock(&k->lock);
	return hit;
}

bool brokerd_keyring_run(struct brokerd_keyring *k, struct brokerd_reflect_run *run, const char *text, size_t len,
			 bool final)
{
	pthread_mutex_lock(&k->lock);
	bool hit = brokerd_reflect_run_feed(run, k->all, k->n_all, text, len, final);
	pthread_mutex_unlock(&k->lock);
	return hit;
}

/* Read src into the keyring unless it is a command that should not run again: with
 * until_key, once it gave a key in this turn; without, once it ran in this turn. Returns
 * 0 when the keyring holds a key of src afterwards, else what reading returned. */
static int prime_source(struct brokerd_keyring *k, const struct rts_key_source *src, bool until_key,
			const struct brokerd_binding *b, const struct brokerd_cancel *cancel)
{
	pthread_mutex_lock(&k->lock);
	struct keyring_source *ks = source_locked(k, src);
	bool skip = src->kind == RTS_KEY_COMMAND && (until_key ? ks->n > 0 : ks->tried);
	bool held = ks->n > 0;
	ks->tried = true;
	pthread_mutex_unlock(&k->lock);
	if (skip)
		return held ? 0 : -ENOKEY;
	char *key = NULL;
	size_t len = 0;
	int r = brokerd_key_read(src, b, cancel, &key, &len);
	if (r == 0)
		brokerd_keyring_add(k, src, key, len);
	brokerd_key_free(key, len);
	/* A key read earlier in the turn is still what an answer could echo. */
	return r == 0 || held ? 0 : r;
}

int brokerd_keyring_prime_scoped(struct brokerd_keyring *k, const struct rts_config *cfg,
				 const struct rts_key_source *model_src, bool scoped, const size_t *mcp, size_t n,
				 const struct brokerd_binding *b, const struct brokerd_cancel *cancel)
{
	int r = prime_source(k, model_src, true, b, cancel);
	if (r < 0)
		return r;
	size_t count = scoped ? n : cfg->n_mcp;
	for (size_t j = 0; j < count; j++) {
		size_t i = scoped ? mcp[j] : j;
		if (i >= cfg->n_mcp || !cfg->mcp[i].has_api_key)
			continue;
		if (prime_source(k, &cfg->mcp[i].api_key, false, b, cancel) == -ECANCELED)
			return -ECANCELED;
	}
	return 0;
}

int brokerd_keyring_prime(struct brokerd_keyring *k, const struct rts_config *cfg, const struct brokerd_binding *b,
			  const struct brokerd_cancel *cancel)
{
	return brokerd_keyring_prime_scoped(k, cfg, &cfg->api_key, false, NULL, 0, b, cancel);
}

char *brokerd_keyring_mask(struct brokerd_keyring *k, const char *text, size_t len, size_t max_chars)
{
	static const char mask[] = "[masked]";
	char *buf = rts_xmalloc(len + 1);
	memcpy(buf, text ? text : "", len);
	buf[len] = '\0';
	size_t n = len;
	pthread_mutex_lock(&k->lock);
	for (size_t i = 0; i < k->n_sources; i++)
		for (size_t j = 0; j < k->sources[i].n; j++) {
			const char *key = k->sources[i].raw[j];
			size_t kl = k->sources[i].raw_len[j];
			char *hit;
			size_t from = 0;
			while (kl > 0 && from < n && (hit = memmem(buf + from, n - from, key, kl))) {
				size_t at = (size_t)(hit - buf);
				/* The mask is never longer than a key worth masking. */
				size_t ml = kl < sizeof(mask) - 1 ? kl : sizeof(mask) - 1;
				memcpy(buf + at, mask, ml);
				memmove(buf + at + ml, buf + at + kl, n - at - kl + 1);
				n -= kl - ml;
				from = at + ml;
			}
		}
	pthread_mutex_unlock(&k->lock);
	if (brokerd_keyring_reflected(k, buf, n, NULL)) {
		explicit_bzero(buf, len + 1);
		free(buf);
		return rts_xstrdup("(withheld: it holds a credential in an encoded form)");
	}
	bool utf8 = rts_utf8_valid(buf, n);
	size_t chars = 0, i = 0;
	for (; i < n; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c < 0x20 || c == 0x7f)
			buf[i] = ' ';
		else if (c >= 0x80 && !utf8)
			buf[i] = '?';
		if ((utf8 ? (c & 0xc0) != 0x80 : true) && ++chars > max_chars)
			break;
	}
	if (i < n) {
		buf = rts_xrealloc(buf, i + 4);
		memcpy(buf + i, "...", 4);
	}
	return buf;
}

size_t brokerd_keyring_longest(struct brokerd_keyring *k)
{
	size_t longest = 0;
	pthread_mutex_lock(&k->lock);
	for (size_t i = 0; i < k->n_sources; i++)
		for (size_t j = 0; j < k->sources[i].n; j++)
			if (k->sources[i].raw_len[j] > longest)
				longest = k->sources[i].raw_len[j];
	pthread_mutex_unlock(&k->lock);
	return longest;
}

enum brokerd_result brokerd_keyring_prime_call(struct brokerd_call *call)
{
	const struct brokerd_binding *b = call->binding;
	int r = brokerd_keyring_prime_scoped(call->keys, call->cfg, call->model_key ? call->model_key : &call->cfg->api_key,
					     call->mcp_scoped, call->mcp_servers, call->n_mcp_servers, b, &call->cancel);
	if (r == 0)
		return BROKERD_OK;
	if (r == -ENOKEY)
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "no_key", 0,
			     "no model credential available for the reflection filter; call refused");
	call->rule = r == -ECANCELED ? "turn_closing" : "no_credential";
	return BROKERD_UNAVAILABLE;
}
