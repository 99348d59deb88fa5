/* SPDX-License-Identifier: Apache-2.0 */
/* Attachment fetches of rich turns, relayed between statd and brokerd (rich-design.md
 * section 2). runnerd holds no network and reads no payload: it forwards statd's
 * ATTACH_FETCH to brokerd, which runs the controlled fetch, and hands the sealed memfd of
 * the answer back to the statd connection that asked, unread. */
#include "config.h"

#include "common/log.h"
#include "common/memfd.h"
#include "common/util.h"
#include "runnerd/runnerd.h"

struct runnerd_fetch {
	struct runnerd_fetch *next;
	struct runnerd_statd *peer; /* NULL once that statd went away */
	char turn_id[RTS_TURN_ID_LEN + 1];
	uint32_t index;
	char *url;
	uint64_t max_bytes;
	uint64_t gen; /* the brokerd link it went out on; 0: waiting for one */
};

static void answer(struct runnerd_statd *peer, const char *turn_id, uint32_t index, int32_t result, int fd)
{
	if (!peer) {
		if (fd >= 0)
			close(fd);
		return;
	}
	if (fd < 0)
		fd = rts_memfd_from_buffer("rts-attachment", "", 0);
	if (fd < 0) {
		log_error_errno(fd, "turn %s: cannot make an empty memfd for an attachment answer: %m", turn_id);
		return;
	}
	int r = rts_link_send_attach_data(peer->link, &(struct rts_msg_attach_data){.turn_id = turn_id,
										      .index = index,
										      .result = result,
										      .mime = "",
										      .fd = fd});
	if (r < 0)
		log_warning_errno(r, "turn %s: cannot answer statd about attachment %u: %m", turn_id, index);
}

static void fetch_unlink(struct runnerd *rd, struct runnerd_fetch *f)
{
	for (struct runnerd_fetch **pp = &rd->fetches; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			rd->n_fetches--;
			break;
		}
	free(f->url);
	free(f);
}

static void send_fetch(struct runnerd *rd, struct runnerd_fetch *f)
{
	f->gen = rd->broker.gen;
	(void)rts_link_send_broker_attach_fetch(rd->broker.link, &(struct rts_msg_broker_attach_fetch){
									 .turn_id = f->turn_id,
									 .index = f->index,
									 .url = f->url,
									 .max_bytes = f->max_bytes,
								 });
}

int runnerd_attach_fetch(struct runnerd *rd, struct runnerd_statd *peer, const struct rts_msg_attach_fetch *m)
{
	if (!rts_turn_id_valid(m->turn_id) || m->index >= RTS_RICH_ATTACHMENTS_MAX || !m->url[0] ||
	    m->max_bytes == 0 || m->max_bytes > RTS_RICH_ATTACHMENT_BYTES_MAX)
		return -EBADMSG;
	for (const char *c = m->url; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return -EBADMSG;
	if (rd->shutting_down || !rd->cfg->rich.enabled || rd->n_fetches >= RUNNERD_FETCHES_MAX) {
		log_warning("turn %s: attachment %u not fetched: %s", m->turn_id, m->index,
			    rd->n_fetches >= RUNNERD_FETCHES_MAX ? "too many fetches at once" : "not now");
		answer(peer, m->turn_id, m->index, rd->n_fetches >= RUNNERD_FETCHES_MAX ? -EBUSY : -ESHUTDOWN, -1);
		return 0;
	}
	struct runnerd_fetch *f = rts_xcalloc(1, sizeof(*f));
	f->peer = peer;
	memcpy(f->turn_id, m->turn_id, sizeof(f->turn_id));
	f->index = m->index;
	f->url = rts_xstrdup(m->url);
	f->max_bytes = m->max_bytes;
	f->next = rd->fetches;
	rd->fetches = f;
	rd->n_fetches++;
	/* Sent once the link is up (runnerd_attach_broker_up, maybe from inside this). */
	runnerd_broker_want(rd);
	return 0;
}

void runnerd_attach_broker_up(struct runnerd *rd)
{
	for (struct runnerd_fetch *f = rd->fetches; f; f = f->next)
		if (!f->gen)
			send_fetch(rd, f);
}

void runnerd_attach_data(struct runnerd *rd, uint64_t gen, struct rts_msg_broker_attach_data *m)
{
	for (struct runnerd_fetch *f = rd->fetches; f; f = f->next) {
		if (f->gen != gen || f->index != m->index || strcmp(f->turn_id, m->turn_id) != 0)
			continue;
		if (f->peer) {
			int r = rts_link_send_attach_data(f->peer->link, &(struct rts_msg_attach_data){
										 .turn_id = m->turn_id,
										 .index = m->index,
										 .result = m->result,
										 .mime = m->mime,
										 .fd = steal_fd(&m->fd),
									 });
			if (r < 0)
				log_warning_errno(r, "turn %s: cannot relay attachment %u to statd: %m", m->turn_id,
						  m->index);
		}
		fetch_unlink(rd, f);
		return;
	}
	log_debug("turn %s: BROKER_ATTACH_DATA %u for a fetch we no longer relay, ignored", m->turn_id, m->index);
}

void runnerd_attach_broker_lost(struct runnerd *rd, uint64_t gen, bool connect_failed)
{
	struct runnerd_fetch *f = rd->fetches, *next;
	bool waiting = false;
	for (; f; f = next) {
		next = f->next;
		if ((gen && f->gen == gen) || (connect_failed && !f->gen)) {
			answer(f->peer, f->turn_id, f->index, -ENOTCONN, -1);
			fetch_unlink(rd, f);
		} else if (!f->gen) {
			waiting = true;
		}
	}
	if (waiting && !connect_failed)
		runnerd_broker_want(rd);
}

void runnerd_attach_forget_peer(struct runnerd *rd, struct runnerd_statd *peer)
{
	for (struct runnerd_fetch *f = rd->fetches; f; f = f->next)
		if (f->peer == peer)
			f->peer = NULL;
}

void runnerd_attach_free(struct runnerd *rd)
{
	while (rd->fetches)
		fetch_unlink(rd, rd->fetches);
}
