/* SPDX-License-Identifier: Apache-2.0 */
/* A precheck's broker (DESIGN.md 8.3; seed: "Precheck scripts"): what a precheck run may
 * reach through its broker socket, and the one route that serves it.
 *
 * The run is bound with PRECHECK_BIND: its channel, target, tier and approvals. brokerd
 * resolves the grant from its own config (the first matching one; none: no way out) and
 * keeps the granted tools that the approvals cover (common/precheck.h). Neither a URL nor
 * a key source ever comes over the link, and neither reaches the container: the script
 * names a server, brokerd holds where it is and what its token is.
 *
 * The rules, each refused with its own log line ("precheck call N refused: RULE"):
 *   - POST /mcp/<server> of a granted server only, the raw target byte for byte (a query,
 *     another path, another server: 404 not_found, in http.c);
 *   - exactly the worker's four headers with the dummy bearer (any other credential:
 *     401 or 400, in http.c);
 *   - at most precheck.maxCalls calls, refused ones included (429 budget_exhausted, in
 *     http.c and gate.c); one at a time: a second while one is pending is 429 busy;
 *   - the body one JSON-RPC 2.0 object (a batch: 400 bad_request), method tools/call
 *     (initialize, tools/list, anything else: 403 forbidden), a tool the grant lists (403)
 *     and the approvals cover (403), the request otherwise as brokerd/mcp.h accepts it;
 *   - the answer 2xx, application/json or one SSE event (brokerd/sse.h), a JSON-RPC
 *     answer to the call (rebuilt, brokerd/mcp.h), and free of the token in every form
 *     brokerd/reflect.h knows (plainly, inside JSON text, base64, ...): else 502
 *     upstream_error.
 * The token is read from its key source for every call (brokerd/keys.h) and sent as the
 * bearer; a source that gives none fails the call (503 unavailable). */
#ifndef BROKERD_PRECHECK_H
#define BROKERD_PRECHECK_H

#include <stdbool.h>

#include "brokerd/brokerd.h"
#include "brokerd/http.h"
#include "common/conf.h"

struct brokerd_precheck;

/* The precheck binding of a run: the grant of (channel, target, tier) in cfg (which must
 * outlive it) narrowed to the approvals (as PRECHECK_BIND carries them, joined by '\n').
 * tier "" is no tier. Returns 0 with *out, -EINVAL for approvals that do not parse or a
 * target out of bounds, -ENOENT when cfg has no "precheck". */
int brokerd_precheck_new(const struct rts_config *cfg, const char *channel, const char *target, const char *tier,
			 const char *approved, struct brokerd_precheck **out);
void brokerd_precheck_free(struct brokerd_precheck *p);

/* The run's call budget (precheck.maxCalls). */
unsigned brokerd_precheck_max_calls(const struct brokerd_precheck *p);
/* How many (server, tool) pairs the run may call, for the bind's log line. */
unsigned brokerd_precheck_tools(const struct brokerd_precheck *p);

/* The route of a precheck's raw request target: "/mcp/<granted server>" exactly, with
 * *name pointing at the server's name in target; NULL for anything else. */
const struct brokerd_route *brokerd_precheck_route(const struct brokerd_precheck *p, const char *target,
						   const char **name);

/* The route's handler: call->precheck is the binding. */
enum brokerd_result brokerd_precheck_handle(struct brokerd_call *call, char **answer);

#endif
