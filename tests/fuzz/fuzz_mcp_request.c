/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a worker's POST /mcp/<server> body through the strict parser and the
 * MCP validator (brokerd/mcp.h), and the same bytes as the server's answer through the
 * answer rebuild.
 *
 * Invariants: only a tools/call naming a declared tool is built, with exactly jsonrpc, id,
 * method and params {name, arguments}; a rebuilt answer carries the request's id and
 * exactly one of result and error. */
#include "config.h"

#include <stdint.h>

#include "brokerd/mcp.h"
#include "common/strictjson.h"
#include "tests/fuzz/fuzz_common.h"

static struct rts_config *cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	rts_json_strict_init();
	cfg = fuzz_config();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	const struct rts_mcp_server *srv = &cfg->mcp[0];
	const char *why = NULL;
	json_object *req = NULL;
	if (brokerd_body_parse(buf, size, &req, &why) == 0) {
		json_object *up = NULL;
		if (brokerd_mcp_request_build(req, srv, &up) == BROKERD_OK) {
			FUZZ_ASSERT(json_object_object_length(up) == 4);
			FUZZ_ASSERT(!strcmp(rts_json_get_string(up, "method"), "tools/call"));
			FUZZ_ASSERT(!strcmp(rts_json_get_string(up, "jsonrpc"), "2.0"));
			json_object *params = rts_json_get(up, "params");
			FUZZ_ASSERT(json_object_object_length(params) == 2);
			const char *name = rts_json_get_string(params, "name");
			bool declared = false;
			for (size_t i = 0; i < srv->n_tools; i++)
				declared |= !strcmp(srv->tools[i].name, name);
			FUZZ_ASSERT(declared);
			FUZZ_ASSERT(json_object_is_type(rts_json_get(params, "arguments"), json_type_object));
			json_object_put(up);
		} else {
			FUZZ_ASSERT(!up);
		}
		json_object_put(req);
	}
	json_object *ans = NULL;
	if (rts_json_parse(buf, size, 64, &ans, &why) == 0) {
		json_object *id = json_object_new_int(1);
		json_object *out = NULL;
		if (brokerd_mcp_answer_rebuild(ans, id, &out) == 0) {
			FUZZ_ASSERT(json_object_get_int(rts_json_get(out, "id")) == 1);
			FUZZ_ASSERT((rts_json_get(out, "result") != NULL) != (rts_json_get(out, "error") != NULL));
			json_object_put(out);
		}
		json_object_put(id);
		json_object_put(ans);
	}
	return 0;
}
