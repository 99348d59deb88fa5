/* SPDX-License-Identifier: Apache-2.0 */
/* POST /mcp/<server>: one JSON-RPC 2.0 tools/call for a declared tool, sent to the
 * operator's stateless Streamable HTTP endpoint (seed, "Optional MCP tools": no
 * initialisation or session, no SSE, no batches, no discovery, resources or prompts).
 * Pure functions; brokerd_mcp_handle() in brokerd.h does the I/O. */
#ifndef BROKERD_MCP_H
#define BROKERD_MCP_H

#include <json.h>

#include "brokerd/brokerd.h"
#include "common/conf.h"

/* Check a worker's parsed body against server srv and build the upstream request from
 * scratch: {"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name","arguments"}}.
 * Accepted: one object with exactly jsonrpc "2.0", method, params and id (a string or an
 * integer: a notification has none); params with exactly name and arguments (an object).
 * Returns BROKERD_OK with *out (caller owns it), BROKERD_BAD_REQUEST for any other shape
 * (batches included), or BROKERD_FORBIDDEN for a method other than tools/call or a tool
 * the server does not declare. */
enum brokerd_result brokerd_mcp_request_build(json_object *req, const struct rts_mcp_server *srv,
					      json_object **out);

/* Rebuild the server's answer to request id (a string or integer JSON value):
 * {"jsonrpc":"2.0","id":id,"result":{...}} or {"jsonrpc":"2.0","id":id,"error":{"code",
 * "message"}}. Returns 0 with *out, or -EINVAL when ans is not a JSON-RPC 2.0 response
 * to that id with exactly one of an object result or a well-formed error. */
int brokerd_mcp_answer_rebuild(json_object *ans, json_object *id, json_object **out);

#endif
