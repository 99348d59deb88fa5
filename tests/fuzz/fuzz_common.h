/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by brokerd's libFuzzer targets (tests/fuzz, built by scripts/ci-fuzz.sh). */
#ifndef TESTS_FUZZ_COMMON_H
#define TESTS_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/json.h"

/* A broken invariant is a crash libFuzzer reports with the input that caused it. */
#define FUZZ_ASSERT(cond)                                                                                              \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);                  \
			abort();                                                                                       \
		}                                                                                                      \
	} while (0)

/* The configuration every target uses: one host tool "clock", one MCP server "docs" with
 * the tools "search" and "fetch". */
static inline struct rts_config *fuzz_config(void)
{
	static const char text[] =
		"{\"model\":\"m\",\"modelUrl\":\"https://api.example/v1/chat/completions\","
		"\"tools\":[{\"name\":\"clock\",\"description\":\"d\",\"parameters\":{},\"command\":[\"/bin/date\"]}],"
		"\"mcp\":[{\"name\":\"docs\",\"url\":\"https://mcp.example/\",\"tools\":["
		"{\"name\":\"search\",\"description\":\"d\",\"parameters\":{}},"
		"{\"name\":\"fetch\",\"description\":\"d\",\"parameters\":{}}]}]}";
	json_object *root = NULL;
	const char *why = NULL;
	char err[256];
	if (rts_json_parse(text, strlen(text), 64, &root, &why) < 0)
		abort();
	struct rts_config *cfg = rts_config_from_json(root, "fuzz.json", err, sizeof(err));
	json_object_put(root);
	if (!cfg)
		abort();
	return cfg;
}

#endif
