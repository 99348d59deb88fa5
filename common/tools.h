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

#endif
