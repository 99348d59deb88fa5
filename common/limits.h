/* SPDX-License-Identifier: Apache-2.0 */
/* Every limit that more than one program checks, defined once.
 *
 * The config loader (common/conf.c), the worker (worker/), runnerd, brokerd, statd and the
 * CLI all read their shared bounds from here, so a config the loader accepts is one every
 * program can run, and a value one program writes is one the next accepts. Limits that only
 * one program knows stay in that program's header. Each limit names the seed rule it comes
 * from where there is one ("seed: ..."); the _Static_asserts at the end are the relations
 * that must hold between them.
 *
 * Header only, no includes: the static worker uses it too. Sizes are bytes unless a name
 * says otherwise. "Encoded" means the bytes a string takes inside a JSON string as json-c
 * writes it, quotes excluded (rts_json_string_len()), which is what counts against a request
 * body. */
#ifndef RTS_LIMITS_H
#define RTS_LIMITS_H

/* ---- Configuration ranges (roundtable-sandbox.json(5)), checked by common/conf.c ---- */

/* Output tokens per model request; the worker asks for them and brokerd caps a request at
 * the configured value (seed: "4,096 output tokens per model request"). */
#define RTS_MAX_OUTPUT_TOKENS_MIN 1u
#define RTS_MAX_OUTPUT_TOKENS_MAX 1048576u
#define RTS_MAX_OUTPUT_TOKENS_DEFAULT 4096u

/* The turn deadline: runnerd's deadline, brokerd's binding bound, statd's backstop, and the
 * worker's pacing (seed: "turnTimeoutMs (1 to 600 seconds)", "a 120-second turn deadline"). */
#define RTS_TURN_TIMEOUT_MS_MIN 1000u
#define RTS_TURN_TIMEOUT_MS_MAX 600000u
#define RTS_TURN_TIMEOUT_MS_DEFAULT 120000u
/* Warm spares per sandboxed channel (DESIGN.md 8.4 "warmSpares": 0 or 1, default 1). */
#define RTS_WARM_SPARES_MAX 1u
#define RTS_WARM_SPARES_DEFAULT 1u
/* "warmSparesMax": spares on the whole host at once, so a host with many quiet channels
 * does not run a container for each (issue 15: a global cap). */
#define RTS_WARM_SPARES_CAP_MIN 1u
#define RTS_WARM_SPARES_CAP_MAX 256u
#define RTS_WARM_SPARES_CAP_DEFAULT 16u
/* "warmSpareIdleMs": a channel without a turn for this long loses its spare (issue 15: an
 * idle timeout per channel); 1 s to 24 h, default 10 minutes. */
#define RTS_WARM_SPARE_IDLE_MS_MIN 1000u
#define RTS_WARM_SPARE_IDLE_MS_MAX 86400000u
#define RTS_WARM_SPARE_IDLE_MS_DEFAULT 600000u

/* The turn container's resources, given to docker run by runnerd (seed: "512 MiB RAM with
 * no additional swap, one CPU, 64 PIDs"; "Tune container resources with limits"). A cpus
 * value above the host's CPUs is run with all of them (Docker refuses more). */
#define RTS_MEMORY_MB_MIN 64u
#define RTS_MEMORY_MB_MAX 65536u
#define RTS_MEMORY_MB_DEFAULT 512u
#define RTS_CPUS_MIN 0.01 /* Docker's granularity */
#define RTS_CPUS_MAX 64.0
#define RTS_CPUS_DEFAULT 1.0
#define RTS_PIDS_MIN 8u
#define RTS_PIDS_MAX 32768u
#define RTS_PIDS_DEFAULT 64u

/* Names of host tools, MCP servers and MCP tools: [a-z][a-z0-9_]{0,47} (seed: "Host tool
 * and MCP server/tool names must match [a-z][a-z0-9_]{0,47}"). The config refuses any other
 * name; brokerd routes only configured ones; the worker re-checks routes. */
#define RTS_NAME_MAX 48u
#define RTS_MAX_TOOLS 32u	/* host tools */
#define RTS_MAX_MCP_SERVERS 8u
#define RTS_MAX_MCP_TOOLS 32u /* tools of one MCP server */
/* Built-in host tools the config can turn on: host_fetch ("fetch"). */
#define RTS_BUILTIN_TOOLS 1u
/* Public tools the worker can be offered: every host tool, the built-in ones and every MCP
 * server's tools. */
#define RTS_PUBLIC_TOOLS_MAX (RTS_MAX_TOOLS + RTS_BUILTIN_TOOLS + RTS_MAX_MCP_SERVERS * RTS_MAX_MCP_TOOLS)

/* The operator's text the model sees, counted encoded: the config refuses more rather than
 * have the worker cut it (seed: "bounded tool descriptions and tool results cannot grow a
 * later turn past the broker's body limit"). */
#define RTS_SYSTEM_PROMPT_MAX (16u * 1024u)
#define RTS_DESCRIPTION_MAX 2048u	    /* one tool's description */
#define RTS_PARAMETERS_MAX (16u * 1024u)    /* one tool's parameters, serialised */
/* Nesting inside one tool's parameters. The schema travels deeper in a /model body
 * (body, tools, entry, function) than in the config, and brokerd parses that body with
 * RTS_JSON_DEPTH_MAX. */
#define RTS_PARAMETERS_DEPTH_MAX 32u

/* The "tools" array of a /model request plus the tool names the system prompt lists
 * (rts_tool_spec_cost(), common/tools.h). The worker's own memory tools take at most
 * RTS_WORKER_OWN_TOOLS_BUDGET of it; the configured tools together get the rest, checked
 * at start so the worker never has to leave a tool out. */
#define RTS_TOOLS_BUDGET (32u * 1024u)
#define RTS_WORKER_OWN_TOOLS 3u /* memory_set, memory_get, memory_remove */
#define RTS_WORKER_OWN_TOOLS_BUDGET (2u * 1024u)
#define RTS_PUBLIC_TOOLS_BUDGET (RTS_TOOLS_BUDGET - RTS_WORKER_OWN_TOOLS_BUDGET)

/* A host tool's own run time limit (tools[].timeoutMs). Never above brokerd's request
 * deadline, which would stop the tool first. */
#define RTS_TOOL_TIMEOUT_MS_MIN 1u
#define RTS_TOOL_TIMEOUT_MS_MAX RTS_BROKER_REQUEST_DEADLINE_MS
#define RTS_TOOL_TIMEOUT_MS_DEFAULT 30000u
/* A host tool's writePaths (DESIGN.md section 8.1): at most this many directories its
 * sandbox may write (brokerd/toolbox.h), each at most RTS_WRITE_PATH_MAX bytes like every
 * path of the config. */
#define RTS_TOOL_WRITE_PATHS_MAX 16u
#define RTS_WRITE_PATH_MAX 1024u

/* The controlled fetch (common/fetch.h) and the config's "fetch" key, which sets the
 * host_fetch guest tool's limits within the same ranges (seed: "Defaults are 60 seconds,
 * five redirects, and 5 MiB for both wire and decoded body"; "Allowed ranges are 1
 * millisecond-120 seconds, 0-10 redirects and 1 byte-32 MiB bodies"). */
#define RTS_FETCH_TIMEOUT_MIN_MS 1u
#define RTS_FETCH_TIMEOUT_MAX_MS 120000u
#define RTS_FETCH_TIMEOUT_DEFAULT_MS 60000u
#define RTS_FETCH_REDIRECTS_MIN 0u
#define RTS_FETCH_REDIRECTS_MAX 10u
#define RTS_FETCH_REDIRECTS_DEFAULT 5u
#define RTS_FETCH_BYTES_MIN 1u
#define RTS_FETCH_BYTES_MAX (32u * 1024u * 1024u)
#define RTS_FETCH_BYTES_DEFAULT (5u * 1024u * 1024u)

#define RTS_TIME_ZONE_MAX 64u /* an IANA name; the worker gets it in its input */
#define RTS_IMAGE_MAX 255u    /* the image reference: the config, runnerd, the CLI's image build */
#define RTS_INITIAL_CHANNELS_MAX 4096u
#define RTS_CONFIG_MAX_BYTES (1024u * 1024u)
/* JSON nesting: the config file (the loader and doctor), worker bodies at brokerd, and the
 * worker's own input. */
#define RTS_JSON_DEPTH_MAX 64

/* ---- Control protocol (statd's control.sock, the CLI) ---- */

#define RTS_CHANNEL_MAX 512u	       /* bytes in a channel key */
#define RTS_SPEAKER_FIELD_MAX 256u     /* bytes in a speaker id, name or principal id */
#define RTS_TEXT_MAX (64u * 1024u)     /* bytes of guest text statd accepts */
#define RTS_REPLY_MAX (64u * 1024u)    /* bytes of reply text passed back to statd */
/* One request line, newline excluded: statd reads at most this, the CLI writes at most
 * this. It holds a message whose every byte is escaped (asserted below). */
#define RTS_CONTROL_LINE_MAX (512u * 1024u)

/* ---- The worker's stdin and stdout (HACKING.md "Worker input", "Worker output") ---- */

#define RTS_TURN_ID_LEN 16u
#define RTS_WORKER_INPUT_MAX (512u * 1024u)   /* runnerd writes, the worker reads */
#define RTS_WORKER_OUTPUT_MAX (256u * 1024u)  /* the worker writes, runnerd reads */
#define RTS_WORKER_NOW_MAX 64u		      /* "now", formatted by runnerd */
#define RTS_WORKER_ERROR_CODE_MAX 32u	      /* [a-z_]{1,32}, logged by runnerd */
/* limits.modelCalls and limits.toolCallsPerResponse: runnerd sends these, the worker
 * refuses more (seed: "The worker itself stops after 12 model calls and eight tools per
 * response"). */
#define RTS_MODEL_CALLS_PER_TURN 12u
#define RTS_TOOL_CALLS_PER_RESPONSE 8u

/* ---- The broker's HTTP contract (worker -> brokerd) ---- */

/* Seed: "Default bounds are 48 broker calls per turn, 256 KiB request bodies, 1 MiB
 * upstream/tool responses", "a 60-second request deadline". brokerd counts and refuses; the
 * worker plans its calls within them. */
#define RTS_BROKER_CALLS_PER_TURN 48u
#define RTS_BROKER_BODY_MAX (256u * 1024u)
#define RTS_UPSTREAM_ANSWER_MAX (1024u * 1024u)
#define RTS_BROKER_REQUEST_DEADLINE_MS 60000u
/* The largest answer brokerd sends back: an upstream answer or tool output of
 * RTS_UPSTREAM_ANSWER_MAX rebuilt as JSON, where one byte takes at most six (\u00XX),
 * plus the wrapping members. The worker reads answers this long. */
#define RTS_BROKER_ANSWER_MAX (6u * RTS_UPSTREAM_ANSWER_MAX + 4096u)

/* /model bodies as brokerd accepts them; the worker's requests stay within (worker.h). */
#define RTS_FUNCTION_NAME_MAX 64u /* [A-Za-z0-9_-]{1,64}, the Chat Completions limit */
#define RTS_MODEL_MESSAGES_MAX 1024u
#define RTS_MODEL_TOOLS_MAX (RTS_WORKER_OWN_TOOLS + RTS_PUBLIC_TOOLS_MAX)
#define RTS_MODEL_TOOL_CALLS_MAX 64u /* in one assistant message */
#define RTS_MODEL_CALL_ID_MAX 256u

/* runRoot/<turn>/broker.sock: runnerd refuses a longer path at start, doctor reports it
 * (seed: runRoot plus the per-turn suffix within 100 characters). */
#define RTS_BROKER_SOCK_PATH_MAX 100u

/* ---- Rich mode (config "rich"; DESIGN.md 8.5; seed "Explicit Pi/subscription mode" to
 * "Pi isolation and continuity") ---- */

/* Config ranges, checked by common/conf_rich.c (seed, "Host options and hooks":
 * startTimeoutMs and turnTimeoutMs 1-600 seconds, defaults 90 and 600 seconds; "128
 * credential-bearing calls and 128,000 output tokens per model call; configurable 1-1,000
 * calls and 1,025-200,000 tokens"). */
#define RTS_RICH_TIMEOUT_MS_MIN 1000u
#define RTS_RICH_TIMEOUT_MS_MAX 600000u
#define RTS_RICH_START_TIMEOUT_MS_DEFAULT 90000u
#define RTS_RICH_TURN_TIMEOUT_MS_DEFAULT 600000u
#define RTS_RICH_MAX_CALLS_MIN 1u
#define RTS_RICH_MAX_CALLS_MAX 1000u
#define RTS_RICH_MAX_CALLS_DEFAULT 128u
#define RTS_RICH_MAX_OUTPUT_TOKENS_MIN 1025u
#define RTS_RICH_MAX_OUTPUT_TOKENS_MAX 200000u
#define RTS_RICH_MAX_OUTPUT_TOKENS_DEFAULT 128000u
/* The channel container (seed, "Pi isolation and continuity": 1.5 GiB RAM with no extra
 * swap, one CPU, 256 PIDs, a 512 MiB temporary file system). The tops are the sealed
 * container's; the bottoms are the Pi worker's own, measured with tests/bench/rich_bottoms.py
 * (the real image and daemons, the scripted Anthropic endpoint, one turn; each limit with
 * the other two at their defaults) on a 2-core Debian 12 host (cgroup v1, Docker 20.10,
 * nodejs 20.20), idle and with two busy loops. A bottom at which the worker cannot start
 * within rich.startTimeoutMs, or dies of its first turn, is not a setting.
 *
 * Memory, with no extra swap: the worker holds 90 to 115 MiB after a turn (20 turns of
 * 16 KiB each add nothing that shows). At 96 MiB and below it is OOM-killed during or right
 * after its turn; with its image's files not yet in the page cache (a host's first start)
 * it cannot answer within 20 s at 104 MiB, answers in 13 s at 112 and in 3 s at 128. 192
 * leaves half as much again. Images cost more: one of 16 MiB took the worker to 270 MiB. */
#define RTS_RICH_MEMORY_MB_MIN 192u
/* CPUs: start-up does not scale down with the quota, and below 0.1 it falls off a cliff.
 * Seconds to readiness, idle (two busy loops): 1 CPU 2 (2), 0.5 3.4, 0.25 8 to 13 (7 to
 * 7.5), 0.2 13 to 17 (11 to 12), 0.15 14 to 24, 0.1 30 to 39 (22 to 24), 0.075 56, 0.05
 * 223, beyond the default start deadline of 90 s. All three bottoms at once, the image's
 * files not yet cached and the host loaded: 8 to 9 s. 0.25 keeps readiness within a
 * seventh of the deadline, so a host several times slower still starts in time. */
#define RTS_RICH_CPUS_MIN 0.25
/* Processes: the runtime's threads, as for the precheck (RTS_PRECHECK_PIDS_MIN): the
 * worker crashes at start (SIGSEGV, exit status 139) at 10, answers at 11 and never ran
 * more than 11 in a turn; it spawns no process of its own. */
#define RTS_RICH_PIDS_MIN 16u
#define RTS_RICH_MEMORY_MB_DEFAULT 1536u
#define RTS_RICH_CPUS_DEFAULT 1.0
#define RTS_RICH_PIDS_DEFAULT 256u
#define RTS_RICH_TMP_MB_MIN 1u
#define RTS_RICH_TMP_MB_MAX 65536u
#define RTS_RICH_TMP_MB_DEFAULT 512u
/* Profiles (names as tool names, [a-z][a-z0-9_]{0,47}) and a profile's persona prompt,
 * which the worker gets with every turn. */
#define RTS_RICH_PROFILES_MAX 64u
#define RTS_RICH_MODEL_MAX 256u
#define RTS_RICH_PROMPT_MAX (256u * 1024u)
/* The Docker log driver's options (docker run --log-opt NAME=VALUE). */
#define RTS_RICH_LOG_OPTIONS_MAX 32u
#define RTS_RICH_LOG_NAME_MAX 64u
#define RTS_RICH_LOG_VALUE_MAX 1024u
/* The host compactor (seed, "Compaction": timeoutMs default the smaller of 120 s and a
 * third of turnTimeoutMs, at most half of turnTimeoutMs; maxRequestBytes default 32 MiB). */
#define RTS_RICH_COMPACTION_TIMEOUT_MS_DEFAULT 120000u
#define RTS_RICH_COMPACTION_REQUEST_MIN 1024u
#define RTS_RICH_COMPACTION_REQUEST_DEFAULT (32u * 1024u * 1024u)
#define RTS_RICH_ENGINE_MAX 64u

/* A rich turn (seed, "Worker content and files"): current text, speaker memory context and
 * final text at most 100,000 characters each (Unicode code points); at most eight
 * PNG/JPEG/WebP/GIF images, 20 MiB each and 64 MiB in all, decoded; at most ten
 * attachments, 25 MiB each and 50 MiB in all; reply files: ten, 10 MiB each, 50 MiB in
 * all, decoded. */
#define RTS_RICH_TEXT_CHARS_MAX 100000u
#define RTS_RICH_TEXT_BYTES_MAX (4u * RTS_RICH_TEXT_CHARS_MAX) /* UTF-8: four bytes at most */
#define RTS_RICH_IMAGES_MAX 8u
#define RTS_RICH_IMAGE_BYTES_MAX (20u * 1024u * 1024u)
#define RTS_RICH_IMAGES_TOTAL_MAX (64u * 1024u * 1024u)
#define RTS_RICH_ATTACHMENTS_MAX 10u
#define RTS_RICH_ATTACHMENT_BYTES_MAX (25u * 1024u * 1024u)
#define RTS_RICH_ATTACHMENTS_TOTAL_MAX (50u * 1024u * 1024u)
#define RTS_RICH_REPLY_FILES_MAX 10u
#define RTS_RICH_REPLY_FILE_BYTES_MAX (10u * 1024u * 1024u)
#define RTS_RICH_REPLY_FILES_TOTAL_MAX (50u * 1024u * 1024u)
#define RTS_RICH_FILE_NAME_MAX 255u /* bytes of a reply file or attachment name */
#define RTS_RICH_MIME_MAX 127u	    /* bytes of a media type */
#define RTS_ATTACH_URL_MAX 8192u    /* bytes of an attachment URL statd asks brokerd to fetch */

/* The rich listener (seed, "Pi isolation and continuity": credential-bearing calls have
 * four in-flight slots, 96 MiB input bodies and 50 MiB upstream-response limits; worker
 * replies have a 72 MiB encoded packet limit). */
#define RTS_RICH_BODY_MAX (96u * 1024u * 1024u)
#define RTS_RICH_UPSTREAM_ANSWER_MAX (50u * 1024u * 1024u)
#define RTS_RICH_REPLY_PACKET_MAX (72u * 1024u * 1024u)
#define RTS_RICH_IN_FLIGHT_MAX 4u

/* What a rich request body may make brokerd build and hold (issue 16). A worker body is
 * parsed by json-c and checked by jansson (common/strictjson.h), and the two trees cost far
 * more than the bytes for small nodes: measured with Debian's json-c 0.16 and jansson 2.14
 * on x86-64 (a million of each in one array), an empty object costs about 790 + 230 bytes,
 * an empty array 150 + 140, a short string or number 70..90 + 40..90. So before either
 * parses, common/jsonscan.h weighs the body in units of 256 bytes: an object 4, an array
 * 2, a scalar (object keys included) 1, and refuses one heavier than
 * RTS_RICH_JSON_WEIGHT_MAX: at most about 128 MiB of trees per body, whatever its size
 * ("[{},{},...]" of 1 MiB would have cost 340 MiB).
 *
 * What a legitimate request needs: a text block {"type":"text","text":"..."} weighs 8, a
 * one-block message {"role":"user","content":[...]} 17, a tool-use block about 20, a tool
 * definition with a schema of twenty properties about 100. 524288 is some 30,000 one-block
 * messages beside a hundred tools: a conversation of a million tokens (the largest context
 * window) averages well above 33 tokens a message, and the bodies big in bytes (base64
 * images, long texts) are light. Nesting is bounded by RTS_JSON_DEPTH_MAX, as in the
 * parse. */
#define RTS_JSON_WEIGHT_UNIT 256u /* bytes of parsed tree a unit of weight stands for */
#define RTS_JSON_WEIGHT_OBJECT 4u
#define RTS_JSON_WEIGHT_ARRAY 2u
#define RTS_JSON_WEIGHT_SCALAR 1u
#define RTS_RICH_JSON_WEIGHT_MAX 524288u

/* All rich listeners of a brokerd together: bytes of request bodies buffered plus the
 * weighed trees (RTS_JSON_WEIGHT_UNIT per unit) of those being handled. A body's bytes are
 * reserved before its first byte is read and kept until its connection ends; a request
 * beyond the budget is refused with 503, so sixteen connections per channel, each at the
 * 96 MiB limit, cannot make brokerd hold gigabytes. 384 MiB takes a largest body with its
 * largest tree (224 MiB) beside a largest reply packet (72 MiB) and more; the worker's SDK
 * retries a 503. Worst case beyond the budget: both parsers' copies of string contents (at
 * most twice the bodies) and an upstream body rebuilt from the tree (once more): the
 * systemd unit's MemoryHigh=/MemoryMax= are sized from that (about 1.5 GiB). */
#define RTS_RICH_BUFFER_BUDGET (384u * 1024u * 1024u)
/* /worker/compact bodies of one turn read or handled at once: a compaction request and a
 * report (it takes none of the four credential-bearing slots). */
#define RTS_RICH_COMPACT_IN_FLIGHT 2u
_Static_assert(1ull * RTS_RICH_JSON_WEIGHT_MAX * RTS_JSON_WEIGHT_UNIT + RTS_RICH_BODY_MAX + RTS_RICH_REPLY_PACKET_MAX <=
		       RTS_RICH_BUFFER_BUDGET,
	       "the budget takes a largest body with its tree beside a reply packet");

/* Sealed memfds between the daemons (common/memfd.h): the turn input statd writes and
 * brokerd reads (images base64-encoded, the text escaped at worst), and the reply brokerd
 * writes and statd reads (built from a validated reply packet). */
#define RTS_RICH_TURN_INPUT_MAX (96u * 1024u * 1024u)
#define RTS_RICH_REPLY_MAX RTS_RICH_REPLY_PACKET_MAX

/* The control protocol with rich messages: a request line of a message carrying images
 * (base64) and attachment URLs, which statd reads and the CLI writes; an event line with a
 * reply and its files, which statd writes and the CLI reads. Lines above
 * RTS_CONTROL_LINE_MAX share a budget in statd (statd/statd.h). */
#define RTS_CONTROL_RICH_LINE_MAX (96u * 1024u * 1024u)
#define RTS_CONTROL_EVENT_MAX (RTS_RICH_REPLY_MAX + 64u * 1024u)
/* ---- The precheck runner (DESIGN.md 8.3; seed: "Precheck scripts"; HACKING.md "Precheck
 * runtime") ---- */

/* Config "precheck": a run's deadline, its broker call budget (refused calls count) and
 * its container (seed: "256 MiB, one CPU, and 32 processes by default", "a 64 MiB /tmp",
 * "timeoutMs (default 60 seconds)", "maxCalls, default 16"). The range of memory is the
 * turn container's (RTS_MEMORY_MB_*); cpus and pids have bottoms of their own and the
 * same tops. */
#define RTS_PRECHECK_TIMEOUT_MS_MIN 1000u
#define RTS_PRECHECK_TIMEOUT_MS_MAX 600000u
#define RTS_PRECHECK_TIMEOUT_MS_DEFAULT 60000u
#define RTS_PRECHECK_MAX_CALLS_MAX 1000u /* the harness's own bound on maxCalls */
#define RTS_PRECHECK_MAX_CALLS_DEFAULT 16u
#define RTS_PRECHECK_MEMORY_MB_DEFAULT 256u
#define RTS_PRECHECK_CPUS_DEFAULT 1.0
#define RTS_PRECHECK_PIDS_DEFAULT 32u
/* The JavaScript runtime's own threads (V8's pool of 4, libuv's pool of 4, its signal and
 * main threads): measured with the image of Debian bookworm's nodejs 20.20 and the harness
 * answering a script that also used the file system and the crypto thread pool, node
 * crashes (SIGSEGV, exit status 139) at 10 processes and answers at 11. 16 leaves room
 * for a runtime that starts a thread or two more; the seed's default is 32. Memory needed
 * no bottom of its own: the same run answered with 12 MiB, the shared bottom is 64. */
#define RTS_PRECHECK_PIDS_MIN 16u
/* CPUs: the JavaScript runtime's start-up does not scale down with its CPU quota. Measured
 * on a 2-core Debian 12 host (cgroup v1, Docker 20.10) with the image of nodejs 20.20 and
 * `node -e` printing one line, 64 MiB: 0.2 CPUs 0.4 s, 0.1 CPUs 0.9 s, 0.05 CPUs 3.6 s,
 * 0.01 CPUs between 91 s and 514 s, beyond the default deadline and at times beyond the
 * top one. A bottom at which a run cannot answer within its deadline is not a setting, so
 * a precheck's cpus start at 0.1; a turn's static worker starts in 5 s at 0.01 and keeps
 * Docker's own bottom (RTS_CPUS_MIN). */
#define RTS_PRECHECK_CPUS_MIN 0.1
#define RTS_PRECHECK_TMPFS_MB 64u
/* Grants: first match wins. Per grant at most RTS_MAX_MCP_SERVERS servers of at most
 * RTS_MAX_MCP_TOOLS tools each, so a run may call at most RTS_PRECHECK_PAIRS_MAX (server,
 * tool) pairs: the harness's bound on its "tools". */
#define RTS_PRECHECK_GRANTS_MAX 64u
#define RTS_PRECHECK_TIERS_MAX 32u
#define RTS_PRECHECK_TOOL_NAME_MAX 128u /* [A-Za-z0-9_.-]{1,128}: the MCP specification's tool names */
#define RTS_PRECHECK_PAIRS_MAX (RTS_MAX_MCP_SERVERS * RTS_MAX_MCP_TOOLS)
/* The control op "precheck" (statd validates; the harness checks the same again). */
#define RTS_PRECHECK_TARGET_MAX 512u	       /* the schedule's target, opaque */
#define RTS_PRECHECK_SCRIPT_MAX (64u * 1024u)    /* the script's bytes */
#define RTS_PRECHECK_SCHEDULE_MAX (16u * 1024u)  /* "schedule" serialised as JSON */
#define RTS_PRECHECK_APPROVED_MAX RTS_PRECHECK_PAIRS_MAX /* entries of "approved" */
/* One approval: SERVER/TOOL, SERVER_TOOL or TOOL (common/precheck.h). */
#define RTS_PRECHECK_APPROVAL_MAX (RTS_NAME_MAX + 1u + RTS_PRECHECK_TOOL_NAME_MAX)
/* "approved" as it travels between the daemons: the entries joined by newlines. */
#define RTS_PRECHECK_APPROVED_TEXT_MAX (RTS_PRECHECK_APPROVED_MAX * (RTS_PRECHECK_APPROVAL_MAX + 1u))
#define RTS_PRECHECK_FIRED_AT_MAX 64u /* ISO 8601 with a zone */
#define RTS_PRECHECK_TODAY_LEN 10u    /* YYYY-MM-DD */
/* The harness's stdin and its one result line (HACKING.md "Precheck runtime"). */
#define RTS_PRECHECK_INPUT_MAX (512u * 1024u)
#define RTS_PRECHECK_OUTPUT_MAX (128u * 1024u)
#define RTS_PRECHECK_NOTE_MAX 1024u	       /* {wake:false, note} */
#define RTS_PRECHECK_CONTEXT_MAX (16u * 1024u) /* {wake:true, context} */
#define RTS_PRECHECK_ERROR_MAX 2048u	       /* {wake:true, error}: the harness cuts longer texts */

/* ---- Relations ---- */

/* The longest public tool name: host_<name> or mcp_<one digit>_<name>. */
_Static_assert(RTS_MAX_MCP_SERVERS <= 10, "MCP server indexes in tool names are one digit");
_Static_assert(sizeof("mcp_0_") - 1 + RTS_NAME_MAX <= RTS_FUNCTION_NAME_MAX,
	       "every public tool name must be a valid function name");

/* A config that fits the tool budget also fits the input runnerd writes: a worker-input
 * tool entry carries route and mcpTool (at most 128 bytes with their member names) but not
 * the {"type":"function","function":...} wrapper of the model's spec. */
#define RTS_WORKER_INPUT_TOOL_EXTRA 128u
/* The worst worker input: every byte of the guest's text and speaker fields escaped to six
 * (control characters become \u00XX), the prompt and tools as the config bounds them. */
#define RTS_WORKER_INPUT_WORST                                                                                  \
	(1024u + 6u * RTS_TEXT_MAX + 2u * 6u * RTS_SPEAKER_FIELD_MAX + RTS_SYSTEM_PROMPT_MAX + RTS_TIME_ZONE_MAX + \
	 RTS_WORKER_NOW_MAX + RTS_PUBLIC_TOOLS_BUDGET + RTS_PUBLIC_TOOLS_MAX * RTS_WORKER_INPUT_TOOL_EXTRA)
_Static_assert(RTS_WORKER_INPUT_WORST <= RTS_WORKER_INPUT_MAX,
	       "every input runnerd can build from a valid config must fit what the worker reads");

/* A control line carries the text, the channel key and four author strings, each byte
 * escaped at worst, plus member names and the id. */
_Static_assert(6u * (RTS_TEXT_MAX + RTS_CHANNEL_MAX + 4u * RTS_SPEAKER_FIELD_MAX) + 2048u <= RTS_CONTROL_LINE_MAX,
	       "every message statd accepts must fit one control line");

_Static_assert(RTS_TOOL_TIMEOUT_MS_DEFAULT <= RTS_TOOL_TIMEOUT_MS_MAX, "the default tool timeout must be valid");
_Static_assert(RTS_TURN_TIMEOUT_MS_MIN <= RTS_TURN_TIMEOUT_MS_DEFAULT &&
		       RTS_TURN_TIMEOUT_MS_DEFAULT <= RTS_TURN_TIMEOUT_MS_MAX,
	       "the default turn deadline must be valid");
/* Rich mode. base64 takes four bytes per three; a text of RTS_RICH_TEXT_CHARS_MAX
 * characters takes at most six bytes per byte escaped. */
_Static_assert(RTS_RICH_START_TIMEOUT_MS_DEFAULT >= RTS_RICH_TIMEOUT_MS_MIN &&
		       RTS_RICH_TURN_TIMEOUT_MS_DEFAULT <= RTS_RICH_TIMEOUT_MS_MAX,
	       "the rich defaults must lie in their range");
_Static_assert(RTS_RICH_MAX_OUTPUT_TOKENS_MIN <= RTS_RICH_MAX_OUTPUT_TOKENS_DEFAULT &&
		       RTS_RICH_MAX_OUTPUT_TOKENS_DEFAULT <= RTS_RICH_MAX_OUTPUT_TOKENS_MAX,
	       "the default output limit must be valid");
_Static_assert(4u * (RTS_RICH_IMAGES_TOTAL_MAX / 3u + 1u) + 6u * RTS_RICH_TEXT_BYTES_MAX + 64u * 1024u <=
		       RTS_RICH_TURN_INPUT_MAX,
	       "every turn input statd may build must fit what brokerd reads");
_Static_assert(4u * (RTS_RICH_REPLY_FILES_TOTAL_MAX / 3u + RTS_RICH_REPLY_FILES_MAX) + 6u * RTS_RICH_TEXT_BYTES_MAX +
			       RTS_RICH_REPLY_FILES_MAX * (6u * RTS_RICH_FILE_NAME_MAX + RTS_RICH_MIME_MAX + 64u) <=
		       RTS_RICH_REPLY_MAX,
	       "every reply brokerd builds from a valid reply packet must fit what statd reads");
_Static_assert(RTS_RICH_COMPACTION_REQUEST_DEFAULT <= RTS_RICH_BODY_MAX, "the default compaction request bound");
/* A rich message: the images' base64 (each padded), the text and the speaker fields and
 * the channel key escaped at worst, every attachment's URL and name escaped at worst, the
 * member names and the id. */
_Static_assert(4u * (RTS_RICH_IMAGES_TOTAL_MAX / 3u + RTS_RICH_IMAGES_MAX) +
			       6u * (RTS_RICH_TEXT_BYTES_MAX + RTS_CHANNEL_MAX + 4u * RTS_SPEAKER_FIELD_MAX) +
			       RTS_RICH_ATTACHMENTS_MAX * 6u * (RTS_ATTACH_URL_MAX + RTS_RICH_FILE_NAME_MAX + 64u) +
			       64u * 1024u <=
		       RTS_CONTROL_RICH_LINE_MAX,
	       "every rich message statd accepts must fit one control line");
/* statd's turn input holds the images as sent and everything else escaped at worst. */
_Static_assert(4u * (RTS_RICH_IMAGES_TOTAL_MAX / 3u + RTS_RICH_IMAGES_MAX) + 6u * RTS_RICH_TEXT_BYTES_MAX +
			       RTS_RICH_ATTACHMENTS_MAX * (6u * (RTS_RICH_FILE_NAME_MAX + 4096u) + 256u) + 64u * 1024u <=
		       RTS_RICH_TURN_INPUT_MAX,
	       "every turn input statd builds must fit what brokerd reads");
_Static_assert(RTS_FETCH_TIMEOUT_MIN_MS <= RTS_FETCH_TIMEOUT_DEFAULT_MS &&
		       RTS_FETCH_TIMEOUT_DEFAULT_MS <= RTS_FETCH_TIMEOUT_MAX_MS &&
		       RTS_FETCH_REDIRECTS_DEFAULT <= RTS_FETCH_REDIRECTS_MAX &&
		       RTS_FETCH_BYTES_MIN <= RTS_FETCH_BYTES_DEFAULT && RTS_FETCH_BYTES_DEFAULT <= RTS_FETCH_BYTES_MAX,
	       "the fetch defaults must be valid");
/* The worst harness input: the script with every byte escaped to six, the schedule as
 * given, every pair of the grant with its member names, and the short fields. */
_Static_assert(1024u + 6u * RTS_PRECHECK_SCRIPT_MAX + RTS_PRECHECK_SCHEDULE_MAX +
			       RTS_PRECHECK_PAIRS_MAX * (32u + RTS_NAME_MAX + RTS_PRECHECK_TOOL_NAME_MAX) +
			       RTS_PRECHECK_FIRED_AT_MAX + RTS_TIME_ZONE_MAX <=
		       RTS_PRECHECK_INPUT_MAX,
	       "every precheck input runnerd can build must fit what the harness reads");
_Static_assert(RTS_PRECHECK_CONTEXT_MAX >= RTS_PRECHECK_ERROR_MAX && RTS_PRECHECK_CONTEXT_MAX >= RTS_PRECHECK_NOTE_MAX,
	       "a precheck answer's text is at most its context's bound");
_Static_assert(RTS_PRECHECK_TIMEOUT_MS_MIN <= RTS_PRECHECK_TIMEOUT_MS_DEFAULT &&
		       RTS_PRECHECK_TIMEOUT_MS_DEFAULT <= RTS_PRECHECK_TIMEOUT_MS_MAX,
	       "the default precheck deadline must be valid");
_Static_assert(RTS_PRECHECK_PIDS_MIN <= RTS_PRECHECK_PIDS_DEFAULT && RTS_PRECHECK_PIDS_DEFAULT <= RTS_PIDS_MAX &&
		       RTS_MEMORY_MB_MIN <= RTS_PRECHECK_MEMORY_MB_DEFAULT &&
		       RTS_PRECHECK_MEMORY_MB_DEFAULT <= RTS_MEMORY_MB_MAX,
	       "the default precheck container must be valid");
_Static_assert(RTS_RICH_MEMORY_MB_MIN <= RTS_RICH_MEMORY_MB_DEFAULT &&
		       RTS_RICH_MEMORY_MB_DEFAULT <= RTS_MEMORY_MB_MAX && RTS_RICH_PIDS_MIN <= RTS_RICH_PIDS_DEFAULT &&
		       RTS_RICH_PIDS_DEFAULT <= RTS_PIDS_MAX && RTS_RICH_MEMORY_MB_MIN >= RTS_MEMORY_MB_MIN &&
		       RTS_RICH_PIDS_MIN >= RTS_PIDS_MIN,
	       "the default rich container must be valid, its bottoms within the sealed container's range");
_Static_assert(RTS_PARAMETERS_DEPTH_MAX + 4 <= RTS_JSON_DEPTH_MAX,
	       "a tool's parameters inside a /model body must stay within brokerd's nesting bound");

#endif
