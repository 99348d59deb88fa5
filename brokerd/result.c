/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <poll.h>

#include "brokerd/brokerd.h"

static const struct {
	unsigned status;
	const char *code;
} results[BROKERD_RESULT_MAX_] = {
	[BROKERD_OK] = {200, "ok"},
	[BROKERD_BAD_REQUEST] = {400, "bad_request"},
	[BROKERD_UNAUTHORIZED] = {401, "unauthorized"},
	[BROKERD_FORBIDDEN] = {403, "forbidden"},
	[BROKERD_NOT_FOUND] = {404, "not_found"},
	[BROKERD_METHOD_NOT_ALLOWED] = {405, "method_not_allowed"},
	[BROKERD_TOO_LARGE] = {413, "too_large"},
	[BROKERD_BUSY] = {429, "busy"},
	[BROKERD_BUDGET_EXHAUSTED] = {429, "budget_exhausted"},
	[BROKERD_UPSTREAM_ERROR] = {502, "upstream_error"},
	[BROKERD_UPSTREAM_TIMEOUT] = {504, "upstream_timeout"},
	[BROKERD_UNAVAILABLE] = {503, "unavailable"},
	[BROKERD_CONFLICT] = {409, "conflict"},
};

unsigned brokerd_result_status(enum brokerd_result r)
{
	return (unsigned)r < BROKERD_RESULT_MAX_ ? results[r].status : 500;
}

const char *brokerd_result_code(enum brokerd_result r)
{
	return (unsigned)r < BROKERD_RESULT_MAX_ ? results[r].code : "unavailable";
}

bool brokerd_cancel_closing(const struct brokerd_cancel *c)
{
	if (c->closing && atomic_load(c->closing))
		return true;
	if (!c->has_client)
		return false;
	/* No events asked for: only a hang-up or an error is reported, so bytes the worker
	 * sends after its request (never read) cannot make this spin or cancel. */
	struct pollfd p = {.fd = c->client_fd, .events = 0};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}
