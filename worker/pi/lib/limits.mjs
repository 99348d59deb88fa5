// SPDX-License-Identifier: Apache-2.0
// Every bound of the Pi worker in one place, with the rule it comes from (the seed's
// sections "Worker content and files", "Compaction", "Pi isolation and continuity";
// rich-design.md sections 3 and 4). brokerd enforces the same bounds on its side; the worker
// keeps to them so it never asks for what would be refused.

/** The broker socket inside the container (the run directory is mounted at /run/broker). */
export const BROKER_SOCKET = "/run/broker/broker.sock";
/** The channel workspace, Pi's working directory. */
export const WORKSPACE = "/workspace";
/** Operator content baked into the image: prompt.md and skills/. */
export const CONTENT_DIR = "/app/content";
/** An empty, read-only directory: Pi's agentDir and the helper loader's cwd, so no default
 * path of Pi's ever points into the guest-writable workspace. */
export const EMPTY_DIR = "/app/empty";

/** The worker's placeholder credentials. The broker owns identity: on the model routes an
 * sk-ant-api03-shaped key keeps the Anthropic SDK (and pi-ai) in its API-key dialect
 * (an sk-ant-oat key would make pi-ai speak Claude Code's OAuth dialect itself); the
 * worker routes take the sealed worker's bearer. Both are public by design. */
export const MODEL_DUMMY_KEY = "sk-ant-api03-roundtable-sandbox-dummy-key";
export const WORKER_DUMMY_KEY = "roundtable-sandbox-dummy-key";

/** Seed: current text and final text each at most 100,000 characters; speaker fields 256. */
export const TEXT_CHARS_MAX = 100_000;
export const SPEAKER_FIELD_MAX = 256;
/** Seed: at most eight images per turn, 20 MiB each, 64 MiB in all (the host checks); at most
 * four go to the model. */
export const IMAGES_IN_MAX = 8;
export const IMAGE_BYTES_MAX = 20 * 1024 * 1024;
export const IMAGES_TOTAL_MAX = 64 * 1024 * 1024;
export const IMAGES_TO_MODEL_MAX = 4;
/** Seed: ten attachments (listed to the model by name; never reopened for images). */
export const ATTACHMENTS_MAX = 10;
/** Seed ("the core limits"): ten reply files, 10 MiB each, 50 MiB in all. */
export const REPLY_FILES_MAX = 10;
export const REPLY_FILE_BYTES_MAX = 10 * 1024 * 1024;
export const REPLY_FILES_TOTAL_MAX = 50 * 1024 * 1024;
/** brokerd's names for files: at most 255 bytes. */
export const FILE_NAME_BYTES_MAX = 255;
/** Seed: read_skill reads at most 256 KiB per file and returns at most 40,000 characters. */
export const SKILL_FILE_BYTES_MAX = 256 * 1024;
export const SKILL_READ_CHARS_MAX = 40_000;
/** The persona prompt of --content (a bound of ours: a system prompt, not a document). */
export const PERSONA_BYTES_MAX = 256 * 1024;
/** Skills in the index (a bound of ours, so a content tree cannot flood the prompt). */
export const SKILLS_MAX = 256;
/** Seed: the memory prompt block at most 100,000 characters. */
export const MEMORY_CHARS_MAX = 100_000;
/** A /worker/next answer: images up to 64 MiB decoded travel as base64. */
export const TURN_INPUT_BYTES_MAX = 96 * 1024 * 1024;
/** Seed: worker replies have a 72 MiB encoded packet limit. */
export const REPLY_PACKET_BYTES_MAX = 72 * 1024 * 1024;
/** A tool or MCP answer read from the broker (it bounds them at 1 MiB; this is a backstop). */
export const TOOL_ANSWER_BYTES_MAX = 4 * 1024 * 1024;
/** A host compactor's answer (a summary; brokerd bounds the compactor's output too). */
export const COMPACT_ANSWER_BYTES_MAX = 8 * 1024 * 1024;
/** Small answers (ready, result, reports). */
export const SMALL_ANSWER_BYTES_MAX = 64 * 1024;

/** Seed: the broker answers a long poll with 204 after 25 s; give up on one after this. */
export const LONG_POLL_MS = 60_000;
/** A call that is not part of a turn's work (ready, reports, the reply packet). */
export const SHORT_CALL_MS = 30_000;
/** Seed: the default and largest turn deadline (600 s); the input's limits.turnTimeoutMs
 * says how much of it is left. */
export const TURN_TIMEOUT_MS_DEFAULT = 600_000;
/** The worker stops a turn this long before the host's deadline, so its answer (a failure
 * text) still reaches the host. */
export const TURN_STOP_MARGIN_MS = 5_000;
/** Seed: 128 credential-bearing calls per turn by default; the input's limits.maxCalls. */
export const MAX_CALLS_DEFAULT = 128;
/** Seed: three host compactions and sixteen compaction reports per turn. */
export const COMPACT_REQUESTS_MAX = 3;
export const COMPACT_REPORTS_MAX = 16;
/** Pi's summary asks for 0.8 x reserveTokens output: the tier reserve (hundreds of
 * thousands) is clamped to Pi's default for it. */
export const SUMMARY_RESERVE_TOKENS = 16_384;
/** Pi's defaults, kept: the reserve below the window, the recent context a compaction keeps. */
export const RESERVE_TOKENS = 16_384;
export const KEEP_RECENT_TOKENS = 20_000;
/** Seed ("Compaction"), the core's tiers. */
export const SOFT_COMPACT_TOKENS = 300_000;
export const HARD_COMPACT_TOKENS = 500_000;
export const COMPACT_HEADROOM_TOKENS = 50_000;
/** A model id Pi's catalogue does not know gets this window (the smaller Claude one). */
export const UNKNOWN_MODEL_WINDOW = 200_000;
