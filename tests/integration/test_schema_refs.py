# SPDX-License-Identifier: Apache-2.0
"""The schema reference rule (issue 10, "Schema checks that cannot be side-stepped";
common/schema.h) through a real brokerd over its real per-turn Unix socket, with the
scripted HTTPS model endpoint recording what reaches it (tests/integration/broker_rig.py).

Every case sends a POST /model whose tool parameters hide a remote reference, give a
schema keyword a value of the wrong JSON type, point a local reference at something other
than a schema (data, where a resolver would read a remote reference hidden there), or put
a reference member in data, and checks:
  - the generic refusal (400 bad_request, connection closed, nothing after the answer, a
    valid request pipelined behind it not read);
  - that the model endpoint recorded nothing;
  - that it was this rule: brokerd's debug log names the walker's reason for this turn, and
    the same body with the reference made local (and the value of its proper type) is
    forwarded, parameters unchanged.

The walker itself is covered position by position and keyword by keyword in
tests/unit/check_broker_schema.c; this file proves the route applies it.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_schema_refs.py
"""
import pytest

from broker_rig import request_bytes
from lifecycle_helpers import wait_for
# The fixtures give this module its own brokerd (module scope), logging at debug level; a
# test asks for a fresh turn each: refused calls count against a turn's call budget.
from test_broker import assert_answer, broker_env, refused, rig, turn  # noqa: F401 (fixtures)

EVIL = "https://evil.example/schema.json"
LOCAL = "#/$defs/a"
DEFS = {"a": {"type": "string"}}

# common/schema.h RTS_SCHEMA_WHY_*
WHY_REMOTE = "schema reference is not a local fragment"
WHY_TYPE = "schema keyword value has the wrong JSON type"
WHY_TARGET = "schema reference does not point at a schema"
WHY_DATA = "schema data holds a reference or anchor"


def rooted(params):
    """params with the root $defs the local references of this file name ("#/$defs/a",
    "#/$defs/%C3%A9"): a pointer must name a schema of its document."""
    out = dict(params)
    out["$defs"] = dict(params.get("$defs", {}), **{"a": {"type": "string"}, "\u00e9": {"type": "string"}})
    return out


def body(params):
    return {"messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "lookup", "parameters": params}}]}


def check(rig, turn, bad, good, why):
    """bad is refused for why and reaches nobody; good, the same with the reference local
    and the value of its type, is forwarded as it is."""
    refused(rig, turn, request_bytes("/model", body(bad)), 400, "bad_request")
    line = f"turn {turn.id}: /model body refused: {why}"
    wait_for(lambda: line in rig.broker_log(), timeout=10, what=f"the log line {line!r}")

    before = len(rig.model_requests())
    assert_answer(turn.post("/model", body(good)), 200)
    # By the time the good request is answered a forwarded bad one would be recorded too.
    reqs = rig.model_requests()[before:]
    assert len(reqs) == 1, f"{len(reqs)} requests reached the model endpoint"
    assert reqs[0]["body"]["tools"][0]["function"]["parameters"] == good


# ---------------------------------------------------------------- a remote reference anywhere

def obj(**kw):
    return dict({"type": "object"}, **kw)


# name -> params holding the sub-schema s at that position
POSITIONS = {
    "root": lambda s: dict(s, type="object", **{"$defs": DEFS}),
    "properties": lambda s: obj(properties={"a": s}),
    "patternProperties": lambda s: obj(patternProperties={"^a": s}),
    "additionalProperties": lambda s: obj(additionalProperties=s),
    "items": lambda s: obj(properties={"a": {"type": "array", "items": s}}),
    "items array": lambda s: obj(properties={"a": {"type": "array", "items": [True, s]}}),
    "prefixItems": lambda s: obj(properties={"a": {"prefixItems": [{"type": "string"}, s]}}),
    "additionalItems": lambda s: obj(properties={"a": {"items": [{}], "additionalItems": s}}),
    "contains": lambda s: obj(properties={"a": {"contains": s}}),
    "allOf": lambda s: obj(allOf=[{}, s]),
    "anyOf": lambda s: obj(anyOf=[{"type": "null"}, s]),
    "oneOf": lambda s: obj(oneOf=[s, False]),
    "not": lambda s: obj(**{"not": s}),
    "if": lambda s: obj(**{"if": s}),
    "then": lambda s: obj(**{"if": {}, "then": s}),
    "else": lambda s: obj(**{"if": {}, "then": {}, "else": s}),
    "$defs": lambda s: obj(**{"$defs": {"x": s}}),
    "definitions": lambda s: obj(definitions={"x": s}),
    "dependentSchemas": lambda s: obj(dependentSchemas={"a": s}),
    "dependencies": lambda s: obj(dependencies={"a": ["b"], "c": s}),
    "propertyNames": lambda s: obj(propertyNames=s),
    "unevaluatedItems": lambda s: obj(properties={"a": {"unevaluatedItems": s}}),
    "unevaluatedProperties": lambda s: obj(unevaluatedProperties=s),
    "contentSchema": lambda s: obj(properties={"a": {"type": "string", "contentSchema": s}}),
    "extends": lambda s: obj(extends=[s]),
    "draft 3 type union": lambda s: {"type": ["object", s]},
    "deep": lambda s: obj(properties={"a": {"items": {"anyOf": [{"properties": {"b": {"allOf": [{"not": s}]}}}]}}}),
    # names that spell keywords or URLs are names; the schemas under them are still checked
    "under keyword-named properties": lambda s: obj(properties={"$ref": {"properties": {"anyOf": s}}}),
    "under a URL-named definition": lambda s: obj(**{"$defs": {EVIL: {"not": s}}}),
}


@pytest.mark.parametrize("position", sorted(POSITIONS))
def test_remote_ref_in_every_position(rig, turn, position):
    at = POSITIONS[position]
    check(rig, turn, rooted(at({"$ref": EVIL})), rooted(at({"$ref": LOCAL})), WHY_REMOTE)


def ref_at(keyword, value):
    return {"$vocabulary": {value: True}} if keyword == "$vocabulary" else {keyword: value}


KEYWORDS = ["$ref", "$dynamicRef", "$recursiveRef", "$id", "$schema", "$vocabulary", "id"]


@pytest.mark.parametrize("where", ["root", "deep"])
@pytest.mark.parametrize("keyword", KEYWORDS)
def test_every_reference_keyword(rig, turn, keyword, where):
    at = POSITIONS[where]
    check(rig, turn, at(ref_at(keyword, "http://json-schema.org/draft-07/schema#")), at(ref_at(keyword, "#")),
          WHY_REMOTE)


# What is not a fragment-only reference: whitespace or escapes a lenient parser might trim,
# split on or decode into a URL, other characters no fragment has, relative references.
NOT_FRAGMENTS = {
    "leading space": " #/$defs/a",
    "leading newline": "\n#/$defs/a",
    "space then URL": "#/$defs/a https://evil.example/",
    "tab then URL": "#/$defs/a\thttps://evil.example/",
    "encoded number sign": "%23https://evil.example/",
    "second number sign": "#/$defs/a#https://evil.example/",
    "backslashes": "\\\\evil.example\\share",
    "raw non-ASCII": "#/$defs/\u00e9",
    "fullwidth number sign": "\uff03/$defs/a",
    "line separator": "#/$defs/a\u2028https://evil.example/",
    "broken escape": "#/$defs/%zz",
    "network-path reference": "//evil.example/s.json",
    "relative file": "other.json#/$defs/a",
    "empty": "",
    "file URL": "file:///etc/passwd",
    "URN": "urn:example:schema",
}


@pytest.mark.parametrize("name", sorted(NOT_FRAGMENTS))
def test_only_fragment_only_references(rig, turn, name):
    at = POSITIONS["properties"]
    check(rig, turn, rooted(at({"$ref": NOT_FRAGMENTS[name]})), rooted(at({"$ref": "#/$defs/%C3%A9"})), WHY_REMOTE)


# ---------------------------------------------------------------- wrong-typed values

HIDDEN = {"$ref": EVIL}
SAFE = {"$ref": LOCAL}

# name -> (bad, good): bad gives a keyword a value of another type, with a remote reference
# inside where that type can hold one; good is the proper type with the reference local.
WRONG_TYPES = {
    "anyOf as an object": ({"anyOf": {"x": HIDDEN}}, {"anyOf": [SAFE]}),
    "allOf as an object": ({"allOf": {"x": HIDDEN}}, {"allOf": [SAFE]}),
    "oneOf as an object": ({"oneOf": {"x": HIDDEN}}, {"oneOf": [SAFE]}),
    "oneOf as a schema": ({"oneOf": HIDDEN}, {"oneOf": [SAFE]}),
    "prefixItems as an object": ({"prefixItems": {"x": HIDDEN}}, {"prefixItems": [SAFE]}),
    "anyOf null": ({"anyOf": None}, {"anyOf": [True]}),
    "not as an array": ({"not": [HIDDEN]}, {"not": SAFE}),
    "additionalProperties as an array": ({"additionalProperties": [HIDDEN]}, {"additionalProperties": SAFE}),
    "additionalItems as an array": ({"additionalItems": [HIDDEN]}, {"additionalItems": SAFE}),
    "contains as an array": ({"contains": [HIDDEN]}, {"contains": SAFE}),
    "if as an array": ({"if": [HIDDEN]}, {"if": SAFE}),
    "then as an array": ({"then": [HIDDEN]}, {"then": SAFE}),
    "else as an array": ({"else": [HIDDEN]}, {"else": SAFE}),
    "propertyNames as an array": ({"propertyNames": [HIDDEN]}, {"propertyNames": SAFE}),
    "unevaluatedItems as an array": ({"unevaluatedItems": [HIDDEN]}, {"unevaluatedItems": SAFE}),
    "unevaluatedProperties as an array": ({"unevaluatedProperties": [HIDDEN]}, {"unevaluatedProperties": SAFE}),
    "contentSchema as an array": ({"contentSchema": [HIDDEN]}, {"contentSchema": SAFE}),
    "not as a string": ({"not": EVIL}, {"not": SAFE}),
    "not null": ({"not": None}, {"not": False}),
    "items as a string": ({"items": EVIL}, {"items": SAFE}),
    "items element as an array": ({"items": [[HIDDEN]]}, {"items": [SAFE]}),
    "items element a number": ({"items": [{}, 7]}, {"items": [{}, True]}),
    "properties as an array": ({"properties": [HIDDEN]}, {"properties": {"x": SAFE}}),
    "patternProperties as an array": ({"patternProperties": [HIDDEN]}, {"patternProperties": {"^x": SAFE}}),
    "$defs as an array": ({"$defs": [HIDDEN]}, {"$defs": {"x": SAFE}}),
    "definitions as an array": ({"definitions": [HIDDEN]}, {"definitions": {"x": SAFE}}),
    "dependentSchemas as an array": ({"dependentSchemas": [HIDDEN]}, {"dependentSchemas": {"x": SAFE}}),
    "property schema as a string": ({"properties": {"a": EVIL}}, {"properties": {"a": SAFE}}),
    "property schema as an array": ({"properties": {"a": [HIDDEN]}}, {"properties": {"a": SAFE}}),
    "property schema null": ({"properties": {"a": None}}, {"properties": {"a": True}}),
    "dependencies as an array": ({"dependencies": [HIDDEN]}, {"dependencies": {"x": SAFE}}),
    "dependencies names with a schema": ({"dependencies": {"a": ["b", HIDDEN]}},
                                         {"dependencies": {"a": ["b"], "c": SAFE}}),
    "dependencies a string": ({"dependencies": {"a": EVIL}}, {"dependencies": {"a": [EVIL]}}),
    "$ref as an object": ({"$ref": HIDDEN}, SAFE),
    "$ref as an array": ({"$ref": [EVIL]}, SAFE),
    "$ref null": ({"$ref": None}, SAFE),
    "$id as an array": ({"$id": ["#a", EVIL]}, {"$id": "#a"}),
    "$schema as an object": ({"$schema": {"$id": EVIL}}, {"$schema": "#"}),
    "$vocabulary as an array": ({"$vocabulary": [EVIL]}, {"$vocabulary": {"#v": True}}),
    "$vocabulary value an object": ({"$vocabulary": {"#v": HIDDEN}}, {"$vocabulary": {"#v": True}}),
    "type as a schema": ({"type": HIDDEN}, {"type": ["string", SAFE]}),
    "type a number": ({"type": 7}, {"type": "string"}),
}


@pytest.mark.parametrize("name", sorted(WRONG_TYPES))
def test_wrong_type_is_refused(rig, turn, name):
    bad, good = WRONG_TYPES[name]
    at = POSITIONS["properties"]
    check(rig, turn, rooted(at(dict({"$defs": DEFS}, **bad))), rooted(at(dict({"$defs": DEFS}, **good))), WHY_TYPE)


# ---------------------------------------------------------------- local references into data

# name -> (bad, the rule's reason, good). The first four are the bodies a reviewer got
# forwarded: a local reference leading a resolver into data that holds a remote one. good
# points the reference at a schema and leaves the data harmless (no reference member).
INTO_DATA = {
    "unknown member": (
        obj(properties={"a": {"$ref": "#/x-hidden"}}, **{"x-hidden": {"$ref": "https://evil.example/s.json"}}),
        WHY_TARGET,
        obj(properties={"a": {"$ref": "#/$defs/hidden"}}, **{"x-hidden": {"url": "https://evil.example/s.json"},
                                                          "$defs": {"hidden": {"type": "string"}}})),
    "default": (
        obj(properties={"a": {"$ref": "#/properties/b/default"}, "b": {"default": {"$ref": "https://evil.example/d"}}}),
        WHY_TARGET,
        obj(properties={"a": {"$ref": "#/properties/b"}, "b": {"default": {"url": "https://evil.example/d"}}})),
    "enum": (
        {"enum": [{"$ref": "http://evil.example/e"}], "properties": {"a": {"$ref": "#/enum/0"}}},
        WHY_DATA,
        {"enum": [{"ref": "http://evil.example/e"}], "properties": {"a": {"$ref": "#"}}}),
    "const with $id": (
        {"const": {"$id": "http://evil.example/", "$ref": "x.json"}, "allOf": [{"$ref": "#/const"}]},
        WHY_DATA,
        {"const": {"id": "http://evil.example/", "ref": "x.json"}, "allOf": [{"$ref": "#"}]}),
    # each rule alone: the pointer into data with the data harmless, the data without a pointer
    "pointer into harmless data": (
        obj(properties={"a": {"$ref": "#/x-hidden"}}, **{"x-hidden": {"type": "string"}}),
        WHY_TARGET,
        obj(properties={"a": {"$ref": "#/$defs/x"}}, **{"x-hidden": {"type": "string"}, "$defs": {"x": {}}})),
    "pointer to an enum index": (
        {"enum": [{"type": "string"}], "properties": {"a": {"$ref": "#/enum/0"}}},
        WHY_TARGET,
        {"enum": [{"type": "string"}], "properties": {"a": {"$ref": "#/properties/b"}, "b": {}}}),
    "percent-encoded pointer into default": (
        obj(properties={"a": {"$ref": "#/properties/b/%64efault"}, "b": {"default": {}}}),
        WHY_TARGET,
        obj(properties={"a": {"$ref": "#/properties/%62"}, "b": {"default": {}}})),
    "~1-escaped pointer into default": (
        obj(properties={"a": {"$ref": "#/properties/x~1y/default"}, "x/y": {"default": {}}}),
        WHY_TARGET,
        obj(properties={"a": {"$ref": "#/properties/x~1y"}, "x/y": {"default": {}}})),
    "pointer to a missing member": (
        obj(properties={"a": {"$ref": "#/$defs/missing"}}, **{"$defs": {"x": {}}}),
        WHY_TARGET,
        obj(properties={"a": {"$ref": "#/$defs/x"}}, **{"$defs": {"x": {}}})),
    "encoded slash": (
        obj(properties={"a": {"$ref": "#/$defs/x%2Fy"}}, **{"$defs": {"x/y": {}}}),
        WHY_TARGET,
        obj(properties={"a": {"$ref": "#/$defs/x~1y"}}, **{"$defs": {"x/y": {}}})),
    "anchor nowhere": (
        obj(properties={"a": {"$ref": "#node"}}),
        WHY_TARGET,
        obj(properties={"a": {"$ref": "#node"}}, **{"$defs": {"n": {"$anchor": "node"}}})),
    "anchor only in data": (
        obj(properties={"a": {"$ref": "#node"}}, default={"$anchor": "node"}),
        WHY_DATA,
        obj(properties={"a": {"$ref": "#node"}}, default={"anchor": "node"}, **{"$defs": {"n": {"$anchor": "node"}}})),
    "draft 4 id anchor in examples": (
        obj(properties={"a": {"$ref": "#node"}}, examples=[{"id": "#node"}]),
        WHY_DATA,
        obj(properties={"a": {"$ref": "#node"}}, examples=[{"id": "node"}], definitions={"n": {"id": "#node"}})),
    "remote reference in an example": (
        obj(properties={"a": {"examples": [{"nested": [{"$ref": EVIL}]}]}}),
        WHY_DATA,
        obj(properties={"a": {"examples": [{"nested": [{"ref": EVIL}]}]}})),
    "meta-schema pointer into const": (
        {"$schema": "#/const", "const": {}},
        WHY_TARGET,
        {"$schema": "#", "const": {}}),
}


@pytest.mark.parametrize("name", sorted(INTO_DATA))
def test_local_reference_into_data_is_refused(rig, turn, name):
    bad, why, good = INTO_DATA[name]
    check(rig, turn, bad, good, why)


# ---------------------------------------------------------------- what passes as it is

def test_boolean_schemas_and_data_pass_unchanged(rig, turn):
    """true/false are schemas wherever a schema goes; enum, const, default, examples and
    unknown keywords are data, so wrong types and remote URLs there are not refused (only
    reference members are), and local pointers that name schemas pass."""
    params = {"type": "object", "$schema": "#", "$id": "#root", "$vocabulary": {"#core": True},
              "properties": {"a": True, "b": False, "$ref": {"type": "string"}, EVIL: True,
                             "c": {"items": [True, False], "additionalItems": False, "contains": True},
                             "d": {"enum": [{"anyOf": {}}, {"url": EVIL}, "$ref"], "const": {"not": []},
                                   "default": {"schema": "http://json-schema.org/draft-07/schema#", "id": "x"},
                                   "examples": [{"id": EVIL}], "x-ref": {"ref": EVIL},
                                   "description": "see " + EVIL, "format": "uri"},
                             "e": {"$ref": "#/properties/c/items/0"}, "f": {"$ref": "#/$defs/x"},
                             "g": {"$ref": "#/definitions/y"}, "h": {"$ref": "#root"}},
              "patternProperties": {"^x": False}, "additionalProperties": True, "propertyNames": True,
              "allOf": [True], "anyOf": [True, False], "oneOf": [True], "not": False,
              "if": True, "then": True, "else": False, "dependentSchemas": {"a": True},
              "dependencies": {"a": ["b"], "b": True}, "unevaluatedProperties": False,
              "$defs": {"x": True}, "definitions": {"y": False}}
    before = len(rig.model_requests())
    assert_answer(turn.post("/model", body(params)), 200)
    reqs = rig.model_requests()[before:]
    assert len(reqs) == 1
    assert reqs[0]["body"]["tools"][0]["function"]["parameters"] == params
