// SPDX-License-Identifier: Apache-2.0
// Run inside the rich worker image (tests/integration/test_pi_worker.py mounts this file
// read-only at /test and runs `node /test/replay.mjs READER` in a sealed container on the
// stand-in's socket and the test's workspace). It opens the channel's session with the
// worker's own modules, as the worker does, and sends model calls through the agent's own
// stream function, the path every turn call takes:
//   raw       the raw persisted branch replayed as it is, as a provider that keeps its own
//             history would (no projection): must be refused before anything is sent;
//   projected the same history projected for READER: must go out;
//   summary   a summary call outside a compaction the hook redacted: must be refused.
// Prints one JSON line: {raw, projected, summary}, each {stopReason, errorMessage}.
import { getApiProvider } from "/app/node_modules/@mariozechner/pi-ai/dist/index.js";
import { useBrokerSocket } from "/app/worker/lib/broker.mjs";
import { parseTurn } from "/app/worker/lib/input.mjs";
import { MODEL_DUMMY_KEY } from "/app/worker/lib/limits.mjs";
import { entryMessages, hiddenFromReader, projectForReader } from "/app/worker/lib/privacy.mjs";
import { ChannelSession, GUARDED_API } from "/app/worker/lib/session.mjs";
import { TurnState } from "/app/worker/lib/turn.mjs";

const reader = process.argv[2];
const input = JSON.parse(process.argv[3]);
useBrokerSocket("/run/broker/broker.sock");
const turnInput = parseTurn(input);
const channel = new ChannelSession({ workspace: "/workspace", persona: "", skills: [], skillsDir: "/app/content/skills" });
const session = await channel.ensure(turnInput);
channel.turn = new TurnState(turnInput, { workspace: "/workspace", persona: "", skillsBlock: "" });
const branch = channel.sm.getBranch();
const raw = entryMessages(branch).filter((m) => ["user", "assistant", "toolResult"].includes(m.role));
raw.push({ role: "user", content: [{ type: "text", text: "replayed turn" }], timestamp: Date.now() });
const projected = projectForReader(raw, reader, hiddenFromReader(branch, reader).ids);

async function call(messages) {
	const stream = await session.agent.streamFn(channel.model, { systemPrompt: "replay test", messages, tools: [] }, {});
	const m = await stream.result();
	return { stopReason: m.stopReason, errorMessage: m.errorMessage ?? null };
}

const out = { raw: await call(raw), projected: await call(projected) };
const direct = getApiProvider(GUARDED_API).streamSimple(channel.model, { systemPrompt: "s", messages: projected, tools: [] }, { apiKey: MODEL_DUMMY_KEY });
const s = await direct.result();
out.summary = { stopReason: s.stopReason, errorMessage: s.errorMessage ?? null };
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
