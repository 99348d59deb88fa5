/* SPDX-License-Identifier: Apache-2.0 */
/* Print common/proto.h's table as JSON, as the compiler understood it, for
 * tests/unit/check-rtsproto.py: it compares the Python harness's copy
 * (tests/integration/rtsproto.py) with this, so neither side is parsed by hand. Never
 * installed. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/msg.h"
#include "common/proto.h"

static const char *link_name(enum rts_proto_link l)
{
	switch (l) {
	case RTS_PROTO_LINK_ANY:
		return "any";
	case RTS_PROTO_LINK_RUNNERD:
		return "runnerd.sock";
	case RTS_PROTO_LINK_BROKERD:
		return "brokerd.sock";
	}
	abort();
}

static const char *kind_name(enum rts_field_kind k)
{
	static const char *const names[] = {
		[RTS_FIELD_U8] = "u8", [RTS_FIELD_U32] = "u32", [RTS_FIELD_I32] = "i32",
		[RTS_FIELD_U64] = "u64", [RTS_FIELD_STR] = "str",
	};
	return names[k];
}

int main(void)
{
	printf("{\"PROTO_VERSION\": %u, \"MSG_MAX\": %u, \"PROGRAM_NAME_MAX\": %u, \"PATH_MAX\": %u,\n", RTS_PROTO_VERSION,
	       RTS_MSG_MAX, RTS_PROGRAM_NAME_MAX, RTS_PROTO_PATH_MAX);
	printf(" \"PROGRAM_STATD\": \"%s\", \"PROGRAM_RUNNERD\": \"%s\", \"PROGRAM_BROKERD\": \"%s\",\n", RTS_PROGRAM_STATD,
	       RTS_PROGRAM_RUNNERD, RTS_PROGRAM_BROKERD);
	printf(" \"DUMMY_KEY\": \"%s\",\n", RTS_DUMMY_KEY);
	printf(" \"RICH_CAP_PRIVATE_TO\": %u, \"RICH_CAP_READER_RECORDS\": %u,\n", RTS_RICH_CAP_PRIVATE_TO,
	       RTS_RICH_CAP_READER_RECORDS);
	printf(" \"RICH_STATE_READY\": %u, \"RICH_STATE_STOPPED\": %u, \"RICH_STATE_FAILED\": %u,\n",
	       RTS_RICH_STATE_READY, RTS_RICH_STATE_STOPPED, RTS_RICH_STATE_FAILED);
	printf(" \"RICH_STOP_OFF\": %u, \"RICH_STOP_FRESH\": %u, \"RICH_STOP_CHANGED\": %u,\n", RTS_RICH_STOP_OFF,
	       RTS_RICH_STOP_FRESH, RTS_RICH_STOP_CHANGED);
#define STATUS_(NAME, value) printf(" \"TURN_" #NAME "\": %d,\n", (value));
	RTS_PROTO_TURN_STATUSES(STATUS_)
#define ANSWER_(NAME, value) printf(" \"PRECHECK_" #NAME "\": %d,\n", (value));
	RTS_PROTO_PRECHECK_ANSWERS(ANSWER_)
	printf(" \"MESSAGES\": {");
	for (size_t i = 0; i < rts_msg_n_descs; i++) {
		const struct rts_msg_desc *d = &rts_msg_descs[i];
		printf("%s\n  \"%s\": [%u, \"%s\", \"%s\", %s, [", i ? "," : "", d->name, d->type, link_name(d->link),
		       d->dir == RTS_PROTO_TO_LISTENER ? "to_listener" : "to_connector", d->has_fd ? "true" : "false");
		for (size_t j = 0; j < d->n_fields; j++)
			printf("%s[\"%s\", \"%s\", %u]", j ? ", " : "", d->fields[j].name, kind_name(d->fields[j].kind),
			       d->fields[j].max);
		printf("]]");
	}
	printf("\n }\n}\n");
	return 0;
}
