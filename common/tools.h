/* SPDX-License-Identifier: Apache-2.0 */
/* A public tool as the model is offered it, and what it costs against RTS_TOOLS_BUDGET.
 *
 * The config loader and the worker both count with these, so a config that fits at start
 * is one the worker sends whole (seed: "bounded tool descriptions and tool results cannot
 * grow a later turn past the broker's body limit"). libc and json-c only: the static worker
 * compiles this file too. */
#ifndef RTS_TOOLS_H
#define RTS_TOOLS_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>

/* True when s matches [a-z][a-z0-9_]{0,max_len-1}: with RTS_NAME_MAX, the names of host
 * tools, MCP servers and MCP tools (seed: "names must match [a-z][a-z0-9_]{0,47}"). */
bool rts_name_valid(const char *s, size_t max_len);

/* The Chat Completions tool entry {"type":"function","function":{"name","description",
 * "parameters"}} for the public name (host_<tool> or mcp_<index>_<tool>). Copies the strings
 * and takes a new reference to parameters. Caller owns the returned reference. */
json_object *rts_tool_spec_new(const char *name, const char *description, json_object *parameters);

/* Bytes spec (from rts_tool_spec_new() for name) adds to a /model request: its serialised
 * length, the comma before it in the "tools" array, and ", <name>" in the system prompt's
 * list of tools. */
size_t rts_tool_spec_cost(json_object *spec, const char *name);

/* The built-in host_fetch tool (DESIGN.md section 8.2), offered when the config's
 * "fetch" key enables it: its public name, its route at brokerd, what the model is told
 * and its parameters. Its route is the one a host tool named RTS_FETCH_TOOL would get,
 * and so is its public name: the config refuses such a host tool while fetch is enabled
 * (common/conf.c). */
#define RTS_FETCH_TOOL "fetch"
#define RTS_FETCH_TOOL_NAME "host_fetch"
#define RTS_FETCH_TOOL_ROUTE "/tools/fetch"
#define RTS_FETCH_TOOL_DESCRIPTION                                                                           \
	"Fetch a public web page (http or https URL) from the host and read it as text. The answer starts " \
	"with the HTTP status, the final URL after redirects and the content type, then the page's text. "  \
	"Binary content, private or local addresses and URLs with credentials are refused; long pages "     \
	"are cut."

/* host_fetch's parameters: {"type":"object","properties":{"url":{"type":"string",...}},
 * "required":["url"],"additionalProperties":false}. Caller owns the returned reference. */
json_object *rts_fetch_tool_parameters(void);

#endif
