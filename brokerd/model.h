/* SPDX-License-Identifier: Apache-2.0 */
/* POST /model: the worker's Chat Completions request in, a rebuilt one out; the upstream
 * answer in, a rebuilt one back (HACKING.md, "Broker HTTP contract"; seed, "Threat model":
 * the model route fixes the URL, the model, non-streaming mode and the output limit, and
 * accepts only system/user/assistant/tool roles with string content and function tool
 * calls). The functions here are pure; brokerd_model_handle() in brokerd.h does the I/O. */
#ifndef BROKERD_MODEL_H
#define BROKERD_MODEL_H

#include <json.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/limits.h"

/* Bounds on a request, beyond the body limit: RTS_MODEL_MESSAGES_MAX, RTS_MODEL_TOOLS_MAX,
 * RTS_MODEL_TOOL_CALLS_MAX, RTS_MODEL_CALL_ID_MAX and RTS_FUNCTION_NAME_MAX, which the
 * worker's requests stay within (common/limits.h). */

/* Validate the parsed body of a worker's POST /model and build the upstream body from
 * scratch: {"model": model, "messages": [...], "tools": [...]? , "tool_choice"?,
 * "stream": false, "max_tokens": min(max_output_tokens, asked)}. Accepted input:
 *   messages     1..RTS_MODEL_MESSAGES_MAX objects; role system|user|assistant|tool;
 *                content a string (assistant: string, or null/absent with tool_calls);
 *                assistant tool_calls [{id, type:"function", function:{name, arguments
 *                (string)}}] with distinct ids; tool messages need tool_call_id naming a
 *                call of the assistant message before them (other tool messages may sit
 *                between), each call answered at most once; no other member (so no
 *                content parts: no image_url, input_audio or file, no file ids);
 *   tools        [{type:"function", function:{name, description?, parameters?}}], names
 *                [A-Za-z0-9_-]{1,64} and distinct, parameters a JSON schema object
 *                that passes rts_schema_check() (common/schema.h: references
 *                local, every keyword value of its expected type);
 *   max_tokens   a positive integer;
 *   tool_choice  "auto" or "none" (sent only with tools);
 * and no other top-level member (n, stream, model, logprobs, temperature, user, ... are
 * all refused, as are provider-native tool types). The shapes are tables of
 * common/jspec.h. Returns 0 with *out (caller owns it), or -EINVAL with *why set to the
 * rule that refused the first problem ("must be a string", no request data; thread-local,
 * valid until this thread's next call). The body must have been parsed with
 * brokerd_body_parse(). */
int brokerd_model_request_build(json_object *req, const char *model, uint32_t max_output_tokens, json_object **out,
				const char **why);

/* Rebuild an upstream Chat Completions answer from scratch: {"choices":[{"index":0,
 * "message":{"role":"assistant","content": string|null, "tool_calls":[{"id","type":
 * "function","function":{"name","arguments"}}]?},"finish_reason": string}],
 * "usage": {"prompt_tokens"?, "completion_tokens"?, "total_tokens"?}?}. Only the first
 * choice is kept and every other upstream member is dropped (reasoning text, refusal,
 * logprobs, system_fingerprint, service_tier, annotations, tool call index, ...).
 * Normalised, as popular servers send them:
 *   content      a string; null or absent -> null; an array of content parts -> its
 *                "text" parts joined, other parts dropped (null when there is none);
 *   tool calls   id absent or null -> "" (ids, empty or repeated ones included, pass as
 *                they are: the worker renames them); type absent -> "function";
 *                arguments a JSON object -> re-serialised JSON text, absent -> "{}";
 *                an empty array -> no tool_calls member;
 *   finish_reason  from what the message holds: "tool_calls" with tool calls, else
 *                "length" ("length", "max_tokens", "model_length") or "content_filter"
 *                as the upstream says, else "stop" (also for null, absent or unknown);
 *   usage        only those three non-negative integer counters; absent when the
 *                upstream has no usage object.
 * Refused (-EINVAL, *why static) when ans is not an object, carries an "error" member,
 * has no non-empty "choices" array, the first choice has no message object, its role is
 * not "assistant", content is another type or holds a part without a string type or a
 * text part without a string text, tool_calls is not an array or holds more than
 * BROKERD_MODEL_TOOL_CALLS_MAX calls, a call is not an object, its id is not a string,
 * its type not "function", it has no function object or no string name, its arguments
 * are neither a string nor an object, finish_reason is not a string, or the rebuilt
 * answer is over RTS_BROKER_ANSWER_MAX bytes (what the worker reads). */
int brokerd_model_answer_rebuild(json_object *ans, json_object **out, const char **why);

#endif
