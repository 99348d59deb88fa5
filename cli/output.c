/* SPDX-License-Identifier: Apache-2.0 */
/* Text from statd (channel keys, replies a guest can steer) on the operator's terminal. */
#include "config.h"

#include "cli/cli.h"
#include "common/json.h"
#include "common/termtext.h"
#include "common/util.h"

void cli_put_field(FILE *f, json_object *str)
{
	rts_term_escape(f, json_object_get_string(str), (size_t)json_object_get_string_len(str), RTS_TERM_NAME);
}

/* One JSON document and a newline. json-c writes C1 controls and bidi overrides raw; they
 * can only occur inside strings, so they are written as \uXXXX escapes there: still the same
 * JSON, but inert in a terminal. */
void cli_print_json(json_object *answer)
{
	cleanup_free char *s = rts_json_dump(answer);
	rts_term_json(stdout, s, strlen(s));
	putchar('\n');
}
