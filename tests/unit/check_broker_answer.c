/* SPDX-License-Identifier: Apache-2.0 */
/* The upstream answer rebuild (brokerd_model_answer_rebuild) against the shapes popular
 * OpenAI-compatible servers really send, each normalised to the one shape the worker
 * reads, and the malformed answers it still refuses, each by its own rule.
 *
 * The JSON below is written with ' for " (swapped before parsing) to stay readable; \\'
 * is a quote escaped inside a JSON string. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/brokerd.h"
#include "brokerd/model.h"
#include "common/json.h"
#include "common/util.h"

static char *unquote(const char *text)
{
	char *s = rts_xstrdup(text);
	for (char *p = s; *p; p++)
		if (*p == '\'')
			*p = '"';
	return s;
}

static json_object *parse(const char *text)
{
	json_object *o = NULL;
	const char *why = NULL;
	ck_assert_msg(rts_json_parse(text, strlen(text), 64, &o, &why) == 0, "test JSON does not parse: %s", text);
	return o;
}

/* Rebuild text (already unquoted); returns the result, *out the rebuilt answer or NULL. */
static int rebuild_raw(const char *text, json_object **out, const char **why)
{
	cleanup_json json_object *ans = parse(text);
	*why = NULL;
	int r = brokerd_model_answer_rebuild(ans, out, why);
	if (r == 0)
		ck_assert_ptr_null(*why);
	else
		ck_assert_ptr_null(*out);
	return r;
}

static void assert_rebuilds_to(const char *in_q, const char *want_q)
{
	cleanup_free char *in = unquote(in_q);
	cleanup_free char *want_text = unquote(want_q);
	cleanup_json json_object *want = parse(want_text);
	cleanup_json json_object *out = NULL;
	const char *why = NULL;
	ck_assert_msg(rebuild_raw(in, &out, &why) == 0, "refused (%s): %s", why, in);
	cleanup_free char *got = rts_json_dump(out);
	ck_assert_msg(json_object_equal(out, want), "rebuilt\n  %s\nto\n  %s\nnot\n  %s", in, got, want_text);
}

/* ---- shapes that must pass ---- */

struct shape {
	const char *name;
	const char *in;
	const char *out;
};

#define CALL(id, name, args) "{'id':" id ",'type':'function','function':{'name':'" name "','arguments':'" args "'}}"
#define ANSWER(content, calls, finish)                                                                                 \
	"{'choices':[{'index':0,'message':{'role':'assistant','content':" content calls "},'finish_reason':'" finish  \
	"'}]}"

static const struct shape shapes[] = {
	{"openai_plain",
	 "{'id':'chatcmpl-1','object':'chat.completion','created':1,'model':'gpt','choices':[{'index':0,"
	 "'message':{'role':'assistant','content':'Hello'},'finish_reason':'stop'}],"
	 "'usage':{'prompt_tokens':5,'completion_tokens':2,'total_tokens':7}}",
	 "{'choices':[{'index':0,'message':{'role':'assistant','content':'Hello'},'finish_reason':'stop'}],"
	 "'usage':{'prompt_tokens':5,'completion_tokens':2,'total_tokens':7}}"},
	/* TGI (and llama.cpp's object mode): arguments as a JSON object, id "0", a description
	 * member in the function, finish_reason "stop" beside the call, no content at all. */
	{"tgi_object_arguments",
	 "{'object':'chat.completion','id':'','created':1,'model':'tgi','system_fingerprint':'3.0.1-sha-1',"
	 "'choices':[{'index':0,'message':{'role':'assistant','tool_calls':[{'id':'0','type':'function',"
	 "'function':{'description':null,'name':'memory_set','arguments':{'scope':'speaker','key':'note',"
	 "'value':'a \\'quoted\\' value','n':[1,2.5,true,null]}}}]},'logprobs':null,'finish_reason':'stop'}],"
	 "'usage':{'prompt_tokens':1,'completion_tokens':2,'total_tokens':3}}",
	 "{'choices':[{'index':0,'message':{'role':'assistant','content':null,'tool_calls':["
	 "{'id':'0','type':'function','function':{'name':'memory_set','arguments':"
	 "'{\\'scope\\':\\'speaker\\',\\'key\\':\\'note\\',\\'value\\':\\'a \\\\\\'quoted\\\\\\' value\\',"
	 "\\'n\\':[1,2.5,true,null]}'}}]},'finish_reason':'tool_calls'}],"
	 "'usage':{'prompt_tokens':1,'completion_tokens':2,'total_tokens':3}}"},
	/* Older llama.cpp: no id; reasoning_content beside; timings at the top. */
	{"llamacpp_no_id",
	 "{'choices':[{'finish_reason':'tool_calls','index':0,'message':{'role':'assistant','reasoning_content':"
	 "'let me think','content':null,'tool_calls':[{'type':'function','function':{'name':'f','arguments':"
	 "'{\\'a\\':1}'}}]}}],'created':1,'model':'m','system_fingerprint':'b4761','object':'chat.completion',"
	 "'usage':{'completion_tokens':5,'prompt_tokens':6,'total_tokens':11},'id':'chatcmpl-x',"
	 "'timings':{'prompt_n':6,'prompt_ms':1.5,'predicted_n':5}}",
	 "{'choices':[{'index':0,'message':{'role':'assistant','content':null,'tool_calls':[" CALL("''", "f",
											  "{\\'a\\':1}") "]},"
	 "'finish_reason':'tool_calls'}],'usage':{'prompt_tokens':6,'completion_tokens':5,'total_tokens':11}}"},
	/* Gemini's compatibility endpoint: every id empty. */
	{"gemini_empty_ids",
	 ANSWER("null", ",'tool_calls':[" CALL("''", "a", "{}") "," CALL("''", "b", "{}") "]", "tool_calls"),
	 ANSWER("null", ",'tool_calls':[" CALL("''", "a", "{}") "," CALL("''", "b", "{}") "]", "tool_calls")},
	{"duplicate_ids",
	 ANSWER("null", ",'tool_calls':[" CALL("'dup'", "a", "{}") "," CALL("'dup'", "b", "{}") "]", "tool_calls"),
	 ANSWER("null", ",'tool_calls':[" CALL("'dup'", "a", "{}") "," CALL("'dup'", "b", "{}") "]", "tool_calls")},
	{"null_id",
	 ANSWER("null", ",'tool_calls':[" CALL("null", "a", "{}") "]", "tool_calls"),
	 ANSWER("null", ",'tool_calls':[" CALL("''", "a", "{}") "]", "tool_calls")},
	/* Ollama: no type, an index in each call, content "" beside the calls. */
	{"ollama_no_type",
	 "{'id':'chatcmpl-9','object':'chat.completion','created':1,'model':'qwen3','system_fingerprint':'fp_ollama',"
	 "'choices':[{'index':0,'message':{'role':'assistant','content':'','reasoning':'hmm','tool_calls':["
	 "{'index':0,'id':'call_x1','function':{'name':'f','arguments':'{}'}}]},'finish_reason':'tool_calls'}],"
	 "'usage':{'prompt_tokens':1,'completion_tokens':1,'total_tokens':2}}",
	 "{'choices':[{'index':0,'message':{'role':'assistant','content':'','tool_calls':[" CALL("'call_x1'", "f",
											       "{}") "]},"
	 "'finish_reason':'tool_calls'}],'usage':{'prompt_tokens':1,'completion_tokens':1,'total_tokens':2}}"},
	{"arguments_absent_or_null",
	 ANSWER("null",
		",'tool_calls':[{'id':'a','function':{'name':'f'}},"
		"{'id':'b','function':{'name':'g','arguments':null}}]",
		"tool_calls"),
	 ANSWER("null", ",'tool_calls':[" CALL("'a'", "f", "{}") "," CALL("'b'", "g", "{}") "]", "tool_calls")},
	/* Mistral's reasoning models: content as parts; thinking dropped, text pieces joined. */
	{"mistral_content_parts",
	 "{'id':'x','object':'chat.completion','model':'magistral','choices':[{'index':0,'message':{'role':"
	 "'assistant','content':[{'type':'thinking','thinking':[{'type':'text','text':'secret plan'}]},"
	 "{'type':'text','text':'Hel'},{'type':'thinking','thinking':[]},{'type':'text','text':'lo'}],"
	 "'tool_calls':null,'prefix':false},'finish_reason':'stop'}],'usage':{'prompt_tokens':1,"
	 "'completion_tokens':1,'total_tokens':2}}",
	 "{'choices':[{'index':0,'message':{'role':'assistant','content':'Hello'},'finish_reason':'stop'}],"
	 "'usage':{'prompt_tokens':1,'completion_tokens':1,'total_tokens':2}}"},
	{"content_parts_without_text",
	 "{'choices':[{'message':{'content':[{'type':'thinking','thinking':[{'type':'text','text':'x'}]},"
	 "{'type':'refusal','refusal':'no'}]}}]}",
	 ANSWER("null", "", "stop")},
	{"content_parts_empty", "{'choices':[{'message':{'content':[]}}]}", ANSWER("null", "", "stop")},
	/* vLLM: reasoning, refusal, annotations, audio, function_call, an empty tool_calls,
	 * stop_reason, prompt_logprobs, kv_transfer_params, service_tier, usage details null. */
	{"vllm_extras",
	 "{'id':'chatcmpl-v','object':'chat.completion','created':1,'model':'qwen','choices':[{'index':0,"
	 "'message':{'role':'assistant','content':'Hi','refusal':null,'annotations':null,'audio':null,"
	 "'function_call':null,'tool_calls':[],'reasoning_content':'think','reasoning':'think'},"
	 "'logprobs':{'content':[{'token':'Hi','logprob':-0.1}]},'finish_reason':'stop','stop_reason':null}],"
	 "'service_tier':null,'system_fingerprint':null,'prompt_logprobs':null,'kv_transfer_params':null,"
	 "'usage':{'prompt_tokens':3,'total_tokens':4,'completion_tokens':1,'prompt_tokens_details':null}}",
	 "{'choices':[{'index':0,'message':{'role':'assistant','content':'Hi'},'finish_reason':'stop'}],"
	 "'usage':{'prompt_tokens':3,'completion_tokens':1,'total_tokens':4}}"},
	/* OpenRouter: provider, native_finish_reason, reasoning_details, usage cost (a float). */
	{"openrouter_extras",
	 "{'id':'gen-1','provider':'Together','model':'m','object':'chat.completion','created':1,'choices':[{"
	 "'logprobs':null,'finish_reason':'stop','native_finish_reason':'end_turn','index':0,'message':{"
	 "'role':'assistant','content':'Hi','refusal':null,'reasoning':'r','reasoning_details':[{'type':"
	 "'reasoning.text','text':'r'}]}}],'usage':{'prompt_tokens':1,'completion_tokens':2,'total_tokens':3,"
	 "'cost':0.00012,'is_byok':false,'completion_tokens_details':{'reasoning_tokens':1}}}",
	 "{'choices':[{'index':0,'message':{'role':'assistant','content':'Hi'},'finish_reason':'stop'}],"
	 "'usage':{'prompt_tokens':1,'completion_tokens':2,'total_tokens':3}}"},
	/* Groq: x_groq, usage timings as floats. */
	{"groq_extras",
	 "{'id':'chatcmpl-g','object':'chat.completion','created':1,'model':'llama','choices':[{'index':0,"
	 "'message':{'role':'assistant','content':'Hi'},'logprobs':null,'finish_reason':'stop'}],"
	 "'usage':{'queue_time':0.02,'prompt_tokens':1,'prompt_time':0.001,'completion_tokens':1,"
	 "'completion_time':0.002,'total_tokens':2,'total_time':0.003},'system_fingerprint':'fp_1',"
	 "'x_groq':{'id':'req_1'}}",
	 "{'choices':[{'index':0,'message':{'role':'assistant','content':'Hi'},'finish_reason':'stop'}],"
	 "'usage':{'prompt_tokens':1,'completion_tokens':1,'total_tokens':2}}"},
	{"no_usage", ANSWER("'Hi'", "", "stop"), ANSWER("'Hi'", "", "stop")},
	{"usage_null", "{'choices':[{'message':{'content':'Hi'}}],'usage':null}", ANSWER("'Hi'", "", "stop")},
	{"usage_not_an_object", "{'choices':[{'message':{'content':'Hi'}}],'usage':'n/a'}", ANSWER("'Hi'", "", "stop")},
	{"usage_odd_counters",
	 "{'choices':[{'message':{'content':'Hi'}}],'usage':{'prompt_tokens':-1,'completion_tokens':'2',"
	 "'total_tokens':3.0,'sk-anything':5}}",
	 "{'choices':[{'index':0,'message':{'role':'assistant','content':'Hi'},'finish_reason':'stop'}],"
	 "'usage':{}}"},
	/* finish_reason from what the message holds. */
	{"stop_beside_tool_calls", ANSWER("null", ",'tool_calls':[" CALL("'c'", "f", "{}") "]", "stop"),
	 ANSWER("null", ",'tool_calls':[" CALL("'c'", "f", "{}") "]", "tool_calls")},
	{"length_beside_tool_calls", ANSWER("null", ",'tool_calls':[" CALL("'c'", "f", "{\\'a") "]", "length"),
	 ANSWER("null", ",'tool_calls':[" CALL("'c'", "f", "{\\'a") "]", "tool_calls")},
	{"tool_calls_without_any", ANSWER("'Hi'", ",'tool_calls':[]", "tool_calls"), ANSWER("'Hi'", "", "stop")},
	{"tool_calls_reason_no_member", ANSWER("'Hi'", "", "tool_calls"), ANSWER("'Hi'", "", "stop")},
	{"finish_null", "{'choices':[{'message':{'content':'Hi'},'finish_reason':null}]}", ANSWER("'Hi'", "", "stop")},
	{"finish_absent", "{'choices':[{'message':{'content':'Hi'}}]}", ANSWER("'Hi'", "", "stop")},
	{"finish_empty", ANSWER("'Hi'", "", ""), ANSWER("'Hi'", "", "stop")},
	{"finish_eos", ANSWER("'Hi'", "", "eos"), ANSWER("'Hi'", "", "stop")},
	{"finish_eos_token", ANSWER("'Hi'", "", "eos_token"), ANSWER("'Hi'", "", "stop")},
	{"finish_end_turn", ANSWER("'Hi'", "", "end_turn"), ANSWER("'Hi'", "", "stop")},
	{"finish_function_call", ANSWER("'Hi'", "", "function_call"), ANSWER("'Hi'", "", "stop")},
	{"finish_length", ANSWER("'Hi'", "", "length"), ANSWER("'Hi'", "", "length")},
	{"finish_max_tokens", ANSWER("'Hi'", "", "max_tokens"), ANSWER("'Hi'", "", "length")},
	{"finish_model_length", ANSWER("'Hi'", "", "model_length"), ANSWER("'Hi'", "", "length")},
	{"finish_content_filter", ANSWER("null", "", "content_filter"), ANSWER("null", "", "content_filter")},
	{"finish_unknown_long",
	 ANSWER("'Hi'", "", "a-finish-reason-much-longer-than-sixty-four-bytes-that-no-server-documents-at-all"),
	 ANSWER("'Hi'", "", "stop")},
	/* Only the first choice counts, whatever its index. */
	{"first_choice_only",
	 "{'choices':[{'index':3,'message':{'content':'one'}},{'index':0,'message':{'content':'two'}}]}",
	 ANSWER("'one'", "", "stop")},
	{"error_null", "{'error':null,'choices':[{'message':{'role':null,'content':'Hi'}}]}",
	 ANSWER("'Hi'", "", "stop")},
};

START_TEST(test_server_shape)
{
	const struct shape *s = &shapes[_i];
	ck_assert_msg(s->name != NULL, "unnamed shape");
	assert_rebuilds_to(s->in, s->out);
}
END_TEST

/* Text content parts keep every byte, embedded NULs and multibyte characters included. */
START_TEST(test_content_parts_exact_bytes)
{
	static const char in[] = "{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"a\\u0000b\"},"
				 "{\"type\":\"text\",\"text\":\"\\u00e9\"}]}}]}";
	cleanup_json json_object *out = NULL;
	const char *why = NULL;
	ck_assert_int_eq(rebuild_raw(in, &out, &why), 0);
	json_object *content =
		rts_json_get(rts_json_get(json_object_array_get_idx(rts_json_get(out, "choices"), 0), "message"),
			     "content");
	ck_assert_int_eq(json_object_get_string_len(content), 5);
	ck_assert_int_eq(memcmp(json_object_get_string(content), "a\0b\xc3\xa9", 5), 0);
}
END_TEST

/* The rebuilt answer has exactly the members model.h lists, at every level. */
START_TEST(test_rebuilt_members_only)
{
	static const char in[] =
		"{'x':1,'choices':[{'index':0,'x':1,'message':{'role':'assistant','x':1,'content':'c','tool_calls':"
		"[{'id':'i','x':1,'index':0,'function':{'name':'f','arguments':{'k':'v'},'x':1}}]},"
		"'finish_reason':'x'}],"
		"'usage':{'prompt_tokens':1,'x':1}}";
	cleanup_free char *text = unquote(in);
	cleanup_json json_object *out = NULL;
	const char *why = NULL;
	ck_assert_int_eq(rebuild_raw(text, &out, &why), 0);
	cleanup_free char *got = rts_json_dump(out);
	ck_assert_str_eq(got, "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"c\","
			      "\"tool_calls\":[{\"id\":\"i\",\"type\":\"function\",\"function\":{\"name\":\"f\","
			      "\"arguments\":\"{\\\"k\\\":\\\"v\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}],"
			      "\"usage\":{\"prompt_tokens\":1}}");
}
END_TEST

/* ---- malformed answers: refused, each by its own rule ---- */

struct refusal {
	const char *in;
	const char *why; /* the rule's own description (logged by brokerd_model_handle) */
};

static const struct refusal refusals[] = {
	{"[]", "answer is not an object"},
	{"'text'", "answer is not an object"},
	{"{'error':{'message':'quota'},'choices':[{'message':{'content':'x'}}]}", "answer carries an error"},
	{"{}", "answer has no choices"},
	{"{'choices':[]}", "answer has no choices"},
	{"{'choices':{}}", "answer has no choices"},
	{"{'choices':[1]}", "first choice has no message object"},
	{"{'choices':[{'text':'completions API'}]}", "first choice has no message object"},
	{"{'choices':[{'delta':{'content':'x'}}]}", "first choice has no message object"},
	{"{'choices':[{'message':'x'}]}", "first choice has no message object"},
	{"{'choices':[{'message':{'role':'user','content':'x'}}]}", "message role is not assistant"},
	{"{'choices':[{'message':{'role':5,'content':'x'}}]}", "message role is not assistant"},
	{"{'choices':[{'message':{'content':5}}]}", "message content is not a string, null or an array of parts"},
	{"{'choices':[{'message':{'content':{'text':'x'}}}]}",
	 "message content is not a string, null or an array of parts"},
	{"{'choices':[{'message':{'content':true}}]}", "message content is not a string, null or an array of parts"},
	{"{'choices':[{'message':{'content':['x']}}]}", "a content part is not an object with a type"},
	{"{'choices':[{'message':{'content':[{'text':'x'}]}}]}", "a content part is not an object with a type"},
	{"{'choices':[{'message':{'content':[{'type':1,'text':'x'}]}}]}",
	 "a content part is not an object with a type"},
	{"{'choices':[{'message':{'content':[{'type':'text'}]}}]}", "a text content part has no text string"},
	{"{'choices':[{'message':{'content':[{'type':'text','text':['x']}]}}]}",
	 "a text content part has no text string"},
	{"{'choices':[{'message':{'content':'x','tool_calls':{}}}]}", "tool_calls is not an array"},
	{"{'choices':[{'message':{'content':'x','tool_calls':'f()'}}]}", "tool_calls is not an array"},
	{"{'choices':[{'message':{'tool_calls':['f']}}]}", "a tool call is not an object"},
	{"{'choices':[{'message':{'tool_calls':[{'id':1,'function':{'name':'f','arguments':'{}'}}]}}]}",
	 "a tool call id is not a string"},
	{"{'choices':[{'message':{'tool_calls':[{'id':{},'function':{'name':'f','arguments':'{}'}}]}}]}",
	 "a tool call id is not a string"},
	{"{'choices':[{'message':{'tool_calls':[{'id':'1','type':'custom',"
	 "'function':{'name':'f','arguments':'{}'}}]}}]}",
	 "a tool call type is not \"function\""},
	{"{'choices':[{'message':{'tool_calls':[{'id':'1','type':5,'function':{'name':'f','arguments':'{}'}}]}}]}",
	 "a tool call type is not \"function\""},
	{"{'choices':[{'message':{'tool_calls':[{'id':'1','type':'function\\u0000x','function':{'name':'f'}}]}}]}",
	 "a tool call type is not \"function\""},
	{"{'choices':[{'message':{'tool_calls':[{'id':'1','type':'function'}]}}]}",
	 "a tool call has no function object"},
	{"{'choices':[{'message':{'tool_calls':[{'id':'1','function':'f'}]}}]}", "a tool call has no function object"},
	{"{'choices':[{'message':{'tool_calls':[{'id':'1','function':{'arguments':'{}'}}]}}]}",
	 "a tool call name is not a string"},
	{"{'choices':[{'message':{'tool_calls':[{'id':'1','function':{'name':7,'arguments':'{}'}}]}}]}",
	 "a tool call name is not a string"},
	{"{'choices':[{'message':{'tool_calls':[{'id':'1','function':{'name':'f','arguments':[1]}}]}}]}",
	 "tool call arguments are neither JSON text nor an object"},
	{"{'choices':[{'message':{'tool_calls':[{'id':'1','function':{'name':'f','arguments':3}}]}}]}",
	 "tool call arguments are neither JSON text nor an object"},
	{"{'choices':[{'message':{'tool_calls':[{'id':'1','function':{'name':'f','arguments':true}}]}}]}",
	 "tool call arguments are neither JSON text nor an object"},
	{"{'choices':[{'message':{'content':'x'},'finish_reason':5}]}", "finish_reason is not a string"},
	{"{'choices':[{'message':{'content':'x'},'finish_reason':{'type':'stop'}}]}", "finish_reason is not a string"},
	/* A bad second call refuses the whole answer, not just that call. */
	{"{'choices':[{'message':{'tool_calls':[{'id':'1','function':{'name':'f'}},{'id':'2','function':{}}]}}]}",
	 "a tool call name is not a string"},
};

START_TEST(test_refused)
{
	cleanup_free char *in = unquote(refusals[_i].in);
	cleanup_json json_object *out = NULL;
	const char *why = NULL;
	ck_assert_msg(rebuild_raw(in, &out, &why) == -EINVAL, "accepted: %s", in);
	ck_assert_msg(why && strcmp(why, refusals[_i].why) == 0, "%s: refused for \"%s\", not \"%s\"", in, why,
		      refusals[_i].why);
}
END_TEST

/* n tool calls of f: the call bound is the rule, n - 1 passes. */
static char *calls_answer(size_t n)
{
	char *s = rts_xstrdup("{\"choices\":[{\"message\":{\"tool_calls\":[");
	for (size_t i = 0; i < n; i++) {
		char *t = rts_xasprintf("%s%s{\"function\":{\"name\":\"f\"}}", s, i ? "," : "");
		free(s);
		s = t;
	}
	char *t = rts_xasprintf("%s]}}]}", s);
	free(s);
	return t;
}

START_TEST(test_tool_call_bound)
{
	cleanup_free char *ok = calls_answer(RTS_MODEL_TOOL_CALLS_MAX);
	cleanup_free char *over = calls_answer(RTS_MODEL_TOOL_CALLS_MAX + 1);
	cleanup_json json_object *out = NULL;
	const char *why = NULL;
	ck_assert_int_eq(rebuild_raw(ok, &out, &why), 0);
	json_object *calls = rts_json_get(
		rts_json_get(json_object_array_get_idx(rts_json_get(out, "choices"), 0), "message"), "tool_calls");
	ck_assert_uint_eq(json_object_array_length(calls), RTS_MODEL_TOOL_CALLS_MAX);
	json_object_put(steal_pointer(&out));
	ck_assert_int_eq(rebuild_raw(over, &out, &why), -EINVAL);
	ck_assert_str_eq(why, "too many tool calls");
}
END_TEST

/* An arguments object of n quotes: 2n bytes upstream, 2n in its JSON text, 4n once that
 * text is a string in the rebuilt answer. */
static char *quotes_answer(size_t n)
{
	const char *head =
		"{\"choices\":[{\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"q\":\"";
	const char *tail = "\"}}}]}}]}";
	size_t hl = strlen(head), tl = strlen(tail);
	char *s = rts_xmalloc(hl + 2 * n + tl + 1);
	memcpy(s, head, hl);
	for (size_t i = 0; i < n; i++)
		memcpy(s + hl + 2 * i, "\\\"", 2);
	memcpy(s + hl + 2 * n, tail, tl + 1);
	return s;
}

START_TEST(test_rebuilt_size_bound)
{
	/* Under RTS_BROKER_ANSWER_MAX as text, over it rebuilt (brokerd reads upstreams of at most
	 * RTS_UPSTREAM_ANSWER_MAX first, so this bound is a second line of defence). */
	size_t n = RTS_BROKER_ANSWER_MAX / 3;
	cleanup_free char *big = quotes_answer(n);
	ck_assert_uint_lt(strlen(big), RTS_BROKER_ANSWER_MAX);
	cleanup_json json_object *out = NULL;
	const char *why = NULL;
	ck_assert_int_eq(rebuild_raw(big, &out, &why), -EINVAL);
	ck_assert_str_eq(why, "rebuilt answer is larger than the worker reads");
	/* The same shape a little under the bound passes. */
	cleanup_free char *fits = quotes_answer(RTS_BROKER_ANSWER_MAX / 4 - 128);
	ck_assert_int_eq(rebuild_raw(fits, &out, &why), 0);
	cleanup_free char *text = rts_json_dump(out);
	ck_assert_uint_le(strlen(text), RTS_BROKER_ANSWER_MAX);
}
END_TEST

/* Rebuilding a rebuilt answer changes nothing: the worker's shape is a fixed point. */
START_TEST(test_rebuild_is_idempotent)
{
	cleanup_free char *in = unquote(shapes[_i].in);
	cleanup_json json_object *once = NULL, *twice = NULL;
	const char *why = NULL;
	ck_assert_int_eq(rebuild_raw(in, &once, &why), 0);
	cleanup_free char *text = rts_json_dump(once);
	ck_assert_int_eq(rebuild_raw(text, &twice, &why), 0);
	cleanup_free char *text2 = rts_json_dump(twice);
	ck_assert_str_eq(text, text2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_answer");
	TCase *tc = tcase_create("shapes");
	tcase_add_loop_test(tc, test_server_shape, 0, (int)RTS_ARRAY_SIZE(shapes));
	tcase_add_loop_test(tc, test_rebuild_is_idempotent, 0, (int)RTS_ARRAY_SIZE(shapes));
	tcase_add_test(tc, test_content_parts_exact_bytes);
	tcase_add_test(tc, test_rebuilt_members_only);
	suite_add_tcase(s, tc);
	tc = tcase_create("refused");
	tcase_add_loop_test(tc, test_refused, 0, (int)RTS_ARRAY_SIZE(refusals));
	tcase_add_test(tc, test_tool_call_bound);
	tcase_add_test(tc, test_rebuilt_size_bound);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
