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
 *
 * A local reference can still lead a resolver out of the schema positions: "#/enum/0",
 * "#/properties/b/default" or "#/x-hidden" make it read data as a schema, and "#name" finds
 * whatever object holds that anchor. So the walker also makes sure that everything a local
 * reference can reach is a schema it checked:
 *  - a JSON pointer ("#/...") in $ref, $dynamicRef, $recursiveRef or $schema resolves, in
 *    this document, to a schema position. It is resolved step by step with the walk's own
 *    grammar (a keyword, then a name or an index where that keyword's value is a map or a
 *    list), so it reaches a value only by the steps the walk took to visit it, and a step
 *    into data, into a keyword's non-schema value or to a member that does not exist
 *    refuses. Read as RFC 6901 says (percent-decoded, then ~1 and ~0 unescaped) it must name
 *    a schema; read by a resolver that skips the decoding or the unescaping it must name a
 *    schema or nothing; an escape that decodes to '/', '~', '%' or '#' is refused, since
 *    resolvers disagree on what it splits or unescapes. Targets are only looked up, never
 *    walked from: a reference cycle is the upstream's to handle, and the work per
 *    reference is linear in its length.
 *  - a plain name ("#name", in the same keywords) follows the anchor grammar of 2020-12 and
 *    is defined at a schema position by $anchor, $dynamicAnchor, or an $id or draft 4 id of
 *    "#name"; read as the pointer "/name" it must not name data.
 *  - data (enum, const, default, examples and every member the walker does not know) holds,
 *    at any depth, no object with a $ref, $dynamicRef, $recursiveRef, $id, $schema, $anchor,
 *    $dynamicAnchor, $recursiveAnchor or $vocabulary member, nor a draft 4 "id" string with
 *    a '#': a resolver that reads data as a schema all the same, or indexes every identifier
 *    in the document, finds no reference and no anchor there.
 * "#" alone is the root, a schema. Each parameters object is its own document: the root of a
 * pointer is the schema passed in.
 *
 * Resolving a pointer by the grammar, rather than recording the objects the walk visited and
 * looking targets up by identity, needs no table: it costs the pointer's length, and it
 * needs no identity for boolean schemas. The data rule alone would already keep a remote
 * reference out of what a pointer into data reaches; the target rule also keeps a resolver
 * from reading data as a schema at all (a {"$vocabulary"...} map, a "dependencies" name
 * list). A data "id" without '#' stays allowed: records with an "id" field are common
 * examples and defaults, and such a value names no anchor; only a resolver that indexes
 * draft 4 ids inside data, and whose base URI for the document the guest guesses exactly,
 * could take it for the document itself.
 *
 * Pure functions, no I/O, no allocation: anchors are recorded in a bounded array in the
 * caller's stack frame (pointers into the tree), pointer tokens decoded into a bounded
 * buffer. The work is linear in the size of the tree; with a plain-name reference the tree
 * is walked twice (the anchor may come after the reference). */
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

/* Distinct anchor names recorded per schema, in walk order; a plain-name reference is looked
 * up among them, and refused (_ANCHORS) when it is not there and more were defined. */
#define RTS_SCHEMA_ANCHORS 64u

/* Bytes of one decoded JSON pointer token (a name or keyword a pointer steps through). */
#define RTS_SCHEMA_TOKEN_MAX 1024u

/* The reasons rts_schema_check() gives (static strings; the log names the rule). */
#define RTS_SCHEMA_WHY_REMOTE "schema reference is not a local fragment"
#define RTS_SCHEMA_WHY_TYPE "schema keyword value has the wrong JSON type"
#define RTS_SCHEMA_WHY_DEPTH "schema nesting is too deep"
#define RTS_SCHEMA_WHY_TARGET "schema reference does not point at a schema"
#define RTS_SCHEMA_WHY_DATA "schema data holds a reference or anchor"
#define RTS_SCHEMA_WHY_ANCHORS "schema defines too many anchors"

/* Check schema, a JSON schema (an object, or true/false) and every schema nested in it at a
 * schema position:
 *   $ref $dynamicRef $recursiveRef $schema: a string that is a local fragment
 *     (rts_schema_local_fragment()) and names a schema of this document: "#", a JSON pointer
 *     to a schema position, or a defined anchor (see above);
 *   $id, and draft 4's id: a string that is a local fragment;
 *   $anchor $dynamicAnchor: a string;
 *   $vocabulary: an object whose keys are local fragments and whose values are booleans;
 *   additionalProperties additionalItems contains not if then else propertyNames
 *     unevaluatedItems unevaluatedProperties contentSchema: one schema;
 *   items, extends (draft 3): one schema or an array of schemas;
 *   allOf anyOf oneOf prefixItems: an array of schemas;
 *   properties patternProperties $defs definitions dependentSchemas: an object mapping
 *     names (data, never checked) to schemas;
 *   dependencies: such an object whose values may also be arrays of property names
 *     (strings);
 *   type, disallow (draft 3): a string, or an array of strings and schema objects;
 *   any other member: data, holding no reference or anchor member at any depth.
 * A schema is an object or a boolean; JSON null is a value of the wrong type like any other.
 * Returns 0, or -EINVAL with *why set to one of the RTS_SCHEMA_WHY_* strings (no schema
 * data): _REMOTE for a reference that is not a local fragment, _TYPE for a value of the
 * wrong type (also a schema position holding neither object nor boolean), _DEPTH beyond
 * RTS_SCHEMA_DEPTH nested schemas (data nesting counts on from its schema), _TARGET for a
 * local reference that names no schema position, _DATA for a reference or anchor in data,
 * _ANCHORS for a plain-name reference to none of the first RTS_SCHEMA_ANCHORS anchor names
 * of a schema that defines more. schema is only read; NULL (a JSON null) is refused with _TYPE. */
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
