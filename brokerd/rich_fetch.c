/* SPDX-License-Identifier: Apache-2.0 */
/* BROKER_ATTACH_FETCH: a rich turn's attachment URL, fetched on the host with the
 * controlled fetch (common/fetch.h; seed, "Worker content and files": attachments are
 * downloaded with controlled fetch, at most 25 MiB each) and handed back in a sealed memfd
 * with BROKER_ATTACH_DATA. brokerd writes no file: statd writes the bytes into the
 * workspace through its no-follow directory descriptor.
 *
 * One thread per fetch, at most BROKERD_RICH_FETCHES at once (the process's; brokerd has
 * one rich side). The main thread answers on the link the request came on, unless that
 * link is gone by then. */
#include "config.h"

#include <ctype.h>

#include "brokerd/audit.h"
#include "brokerd/rich.h"
#include "common/fetch.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/memfd.h"
#include "common/util.h"

struct rich_fetch {
	struct brokerd_rich *rich;
	struct rts_link *link; /* main thread only; NULL once the link is gone */
	char turn_id[RTS_TURN_ID_LEN + 1];
	uint32_t index;
	char *url;
	size_t max_bytes;
	int result;
	char mime[RTS_RICH_MIME_MAX + 1];
	int fd;
	struct rich_fetch *next;
};

static pthread_mutex_t fetch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rich_fetch *running; /* under fetch_lock; the thread owns everything but link */
static struct rich_fetch *finished;
static unsigned n_fetches;	    /* running and finished, not answered yet */
static atomic_bool stopping;

bool brokerd_rich_fetch_idle(void);
void brokerd_rich_fetch_deliver(struct brokerd_rich *rich);
void brokerd_rich_fetch_link_down(struct rts_link *l);
void brokerd_rich_fetch_stop(void);

static bool fetch_cancelled(void *arg)
{
	return atomic_load(&stopping);
}

/* The media type without parameters, lower-cased, when it is one ("type/subtype" of token
 * characters); else "". */
static void media_type(const char *ct, char *out, size_t len)
{
	out[0] = '\0';
	if (!ct)
		return;
	size_t n = strcspn(ct, ";");
	while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
		n--;
	if (n == 0 || n >= len)
		return;
	bool slash = false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)ct[i];
		if (c == '/' && !slash && i > 0 && i + 1 < n) {
			slash = true;
		} else if (!(isalnum(c) || strchr("!#$&^_.+-", c))) {
			return;
		}
		out[i] = (char)tolower(c);
	}
	out[n] = '\0';
	if (!slash)
		out[0] = '\0';
}

static void *fetch_thread(void *arg)
{
	struct rich_fetch *f = arg;
	struct rts_fetch_opts opts = RTS_FETCH_OPTS_DEFAULT;
	opts.max_bytes = f->max_bytes;
	opts.cancel.cancelled = fetch_cancelled;
	struct rts_fetch_result res;
	const char *why = NULL;
	uint64_t started = rts_now_ms();
	int r = rts_fetch(f->url, strlen(f->url), &opts, &res, &why);
	const char *rule = r == -EACCES ? "fetch_rule" : r == -EFBIG ? "attachment_too_large"
			   : r == -ETIMEDOUT ? "fetch_timeout" : r < 0 ? "fetch_failed" : "attachment_fetch";
	if (r == 0 && (res.status < 200 || res.status > 299)) {
		why = "the answer's status is not 2xx";
		rule = "fetch_status";
		r = -EIO;
	}
	if (r == 0) {
		media_type(res.content_type, f->mime, sizeof(f->mime));
		f->fd = rts_memfd_from_buffer("rts-attachment", res.body, res.len);
		if (f->fd < 0) {
			why = "cannot make the memfd";
			rule = "server_error";
			r = -EIO;
		}
	}
	/* Its audit entry (brokerd/audit.h): never the URL, which is the guest's. */
	brokerd_audit_decision(f->turn_id, NULL, 0, 0, "rich_attachment", rule,
			       r == 0 ? BROKERD_OK : r == -EACCES ? BROKERD_FORBIDDEN : r == -EFBIG ? BROKERD_TOO_LARGE
			       : r == -ETIMEDOUT ? BROKERD_UPSTREAM_TIMEOUT : BROKERD_UPSTREAM_ERROR,
			       r != -EACCES, rts_now_ms() - started);
	rts_fetch_result_release(&res);
	f->result = r == 0 || r == -EACCES || r == -EFBIG || r == -ETIMEDOUT ? r : -EIO;
	if (r < 0)
		rts_log_turn(LOG_WARNING, f->turn_id, NULL, r == -EACCES ? "refused" : "error", rts_now_ms() - started,
			     "attachment %u not fetched: %s", f->index, why ? why : "failed");
	pthread_mutex_lock(&fetch_lock);
	for (struct rich_fetch **p = &running; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			break;
		}
	f->next = finished;
	finished = f;
	pthread_mutex_unlock(&fetch_lock);
	brokerd_rich_poke(f->rich);
	return NULL;
}

static void answer(struct rts_link *l, const char *turn_id, uint32_t index, int result, const char *mime, int fd)
{
	if (fd < 0)
		fd = rts_memfd_from_buffer("rts-attachment", NULL, 0);
	if (!l || fd < 0) {
		if (fd >= 0)
			close(fd);
		return;
	}
	int r = rts_link_send_broker_attach_data(l, &(struct rts_msg_broker_attach_data){
							    .turn_id = turn_id,
							    .index = index,
							    .result = result,
							    .mime = mime,
							    .fd = fd,
						    });
	if (r < 0)
		log_warning_errno(r, "turn %s: cannot send BROKER_ATTACH_DATA: %m", turn_id);
}

int brokerd_rich_fetch_start(struct brokerd_rich *rich, struct rts_link *l, const struct rts_msg_broker_attach_fetch *m)
{
	bool id_ok = rts_turn_id_valid(m->turn_id);
	char why[96] = "";
	if (!id_ok)
		snprintf(why, sizeof(why), "the turn id is malformed");
	else if (!m->url[0])
		snprintf(why, sizeof(why), "the URL is empty");
	else if (m->max_bytes == 0 || m->max_bytes > RTS_RICH_ATTACHMENT_BYTES_MAX)
		snprintf(why, sizeof(why), "its size limit is outside 1 to %u bytes", RTS_RICH_ATTACHMENT_BYTES_MAX);
	if (why[0]) {
		/* Each refusal names its reason, as a fetch's does (fetch_thread). */
		rts_log_turn(LOG_WARNING, id_ok ? m->turn_id : NULL, NULL, "refused", 0, "attachment %u not fetched: %s",
			     m->index, why);
		brokerd_audit_decision(id_ok ? m->turn_id : NULL, NULL, 0, 0, "rich_attachment", "attachment_request",
				       BROKERD_BAD_REQUEST, false, 0);
		answer(l, m->turn_id, m->index, -EINVAL, "", -1);
		return 0;
	}
	pthread_mutex_lock(&fetch_lock);
	bool busy = n_fetches >= BROKERD_RICH_FETCHES || atomic_load(&stopping);
	if (!busy)
		n_fetches++;
	pthread_mutex_unlock(&fetch_lock);
	if (busy) {
		brokerd_audit_decision(m->turn_id, NULL, 0, 0, "rich_attachment", "fetch_slots", BROKERD_BUSY, false, 0);
		answer(l, m->turn_id, m->index, atomic_load(&stopping) ? -ESHUTDOWN : -EBUSY, "", -1);
		return 0;
	}
	struct rich_fetch *f = rts_xcalloc(1, sizeof(*f));
	f->rich = rich;
	f->link = l;
	snprintf(f->turn_id, sizeof(f->turn_id), "%s", m->turn_id);
	f->index = m->index;
	f->url = rts_xstrdup(m->url);
	f->max_bytes = (size_t)m->max_bytes;
	f->fd = -1;
	pthread_mutex_lock(&fetch_lock);
	f->next = running;
	running = f;
	pthread_mutex_unlock(&fetch_lock);

	int r = brokerd_thread_start(NULL, fetch_thread, f);
	if (r != 0) {
		pthread_mutex_lock(&fetch_lock);
		for (struct rich_fetch **p = &running; *p; p = &(*p)->next)
			if (*p == f) {
				*p = f->next;
				break;
			}
		n_fetches--;
		pthread_mutex_unlock(&fetch_lock);
		answer(l, f->turn_id, f->index, -EIO, "", -1);
		free(f->url);
		free(f);
	}
	return 0;
}

void brokerd_rich_fetch_deliver(struct brokerd_rich *rich)
{
	pthread_mutex_lock(&fetch_lock);
	struct rich_fetch *list = steal_pointer(&finished);
	pthread_mutex_unlock(&fetch_lock);
	while (list) {
		struct rich_fetch *f = list;
		list = f->next;
		answer(f->link, f->turn_id, f->index, f->result, f->mime, steal_fd(&f->fd));
		free(f->url);
		free(f);
		pthread_mutex_lock(&fetch_lock);
		n_fetches--;
		pthread_mutex_unlock(&fetch_lock);
	}
}

void brokerd_rich_fetch_link_down(struct rts_link *l)
{
	/* link is only read on the main thread (here and in _deliver), so the lock only
	 * guards the lists. */
	pthread_mutex_lock(&fetch_lock);
	for (struct rich_fetch *f = running; f; f = f->next)
		if (f->link == l)
			f->link = NULL;
	for (struct rich_fetch *f = finished; f; f = f->next)
		if (f->link == l)
			f->link = NULL;
	pthread_mutex_unlock(&fetch_lock);
}

void brokerd_rich_fetch_stop(void)
{
	atomic_store(&stopping, true);
}

bool brokerd_rich_fetch_idle(void)
{
	pthread_mutex_lock(&fetch_lock);
	bool idle = n_fetches == 0;
	pthread_mutex_unlock(&fetch_lock);
	return idle;
}
