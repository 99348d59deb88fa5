/* SPDX-License-Identifier: Apache-2.0 */
/* The reference rule for JSON schemas a guest hands brokerd (seed, "Threat model": the
 * keywords $ref, $dynamicRef, $recursiveRef, $id, $schema and $vocabulary accept only local
 * fragments, not remote URLs; the check visits actual schema positions, not property names
 * or enum/const data).
 *
 * The only guest-controlled schemas that reach brokerd are the tool definitions of a POST
 * /model body (tools[].function.parameters, brokerd/model.h). /tools/<name> and /mcp/<server>
 * carry arguments (data, not schemas), and no upstream answer brokerd accepts carries one
 * (MCP tools/list is refused).
 *
 * The walker knows, for every keyword of drafts 3 to 2020-12 whose value holds schemas or a
 * reference, which JSON types that value may have, and refuses any other type instead of
 * skipping it: a schema hidden in an object where anyOf expects an array, or in an array
 * under not, would otherwise pass unchecked to an upstream that may read it differently.
 * Members it does not know (type names, enum, const, default, examples, description,
 * format, ...) are data and are not looked into. Pure functions, no I/O, no allocation. */
#ifndef RTS_SCHEMA_H
#define RTS_SCHEMA_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>

/* Nested schemas (one per keyword step: "properties" then a name counts once, like "not").
 * As deep as the JSON brokerd parses at all (BROKERD_JSON_DEPTH), so a schema in a body is
 * never refused for depth alone; the bound is the walker's own, for callers with deeper
 * trees. The work is linear in the size of the tree: each value is visited at most once and
 * references are never followed. */
#define RTS_SCHEMA_DEPTH 64u

/* The reasons rts_schema_check() gives (static strings; the log names the rule). */
#define RTS_SCHEMA_WHY_REMOTE "schema reference is not a local fragment"
#define RTS_SCHEMA_WHY_TYPE "schema keyword value has the wrong JSON type"
#define RTS_SCHEMA_WHY_DEPTH "schema nesting is too deep"

/* Check schema, a JSON schema (an object, or true/false) and every schema nested in it at a
 * schema position:
 *   $ref $dynamicRef $recursiveRef $id $schema, and draft 4's id: a string that is a local
 *     fragment (rts_schema_local_fragment());
 *   $vocabulary: an object whose keys are local fragments and whose values are booleans;
 *   additionalProperties additionalItems contains not if then else propertyNames
 *     unevaluatedItems unevaluatedProperties contentSchema: one schema;
 *   items, extends (draft 3): one schema or an array of schemas;
 *   allOf anyOf oneOf prefixItems: an array of schemas;
 *   properties patternProperties $defs definitions dependentSchemas: an object mapping
 *     names (data, never checked) to schemas;
 *   dependencies: such an object whose values may also be arrays of property names
 *     (strings);
 *   type, disallow (draft 3): a string, or an array of strings and schema objects.
 * A schema is an object or a boolean; JSON null is a value of the wrong type like any other.
 * Returns 0, or -EINVAL with *why set to one of the RTS_SCHEMA_WHY_* strings (no schema
 * data): _REMOTE for a reference that is not a local fragment, _TYPE for a value of the
 * wrong type (also a schema position holding neither object nor boolean), _DEPTH beyond
 * RTS_SCHEMA_DEPTH nested schemas. schema is only read; NULL (a JSON null) is refused
 * with _TYPE. */
int rts_schema_check(json_object *schema, const char **why);

/* True when the len bytes at s are a fragment-only URI reference (RFC 3986 section 4.4: a
 * same-document reference): "#" followed only by fragment characters (unreserved,
 * sub-delims, ":", "@", "/", "?") and %HH escapes. So "#", "#/$defs/a", "#/properties/a%20b"
 * and "#anchor" pass; a scheme, an authority, a path, a query, an empty string, leading or
 * embedded whitespace, a raw non-ASCII byte, a second "#" or a malformed escape do not.
 * A lenient URL parser cannot read such a string as anything but a fragment of the
 * document it is in: it has no character that ends a fragment or that a parser trims. */
bool rts_schema_local_fragment(const char *s, size_t len);

#endif
