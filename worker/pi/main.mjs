// SPDX-License-Identifier: Apache-2.0
// roundtable-sandbox's rich-mode worker: one Pi agent session per channel, in the channel's
// long-lived sealed container (DESIGN.md 8.5; HACKING.md "Rich worker").
//
//   node /app/worker/main.mjs [--broker SOCKET] [--workspace DIR] [--content DIR]
//
// It announces itself on POST /worker/ready with its capabilities and whether the session
// holds private history, long-polls POST /worker/next, runs each turn it is handed in the
// channel's Pi session (lib/turn.mjs), and returns the reply and its files on POST
// /worker/result. When the broker socket goes away (a daemon restart re-creates it in the
// same directory) it announces itself again and goes on polling. Nothing else leaves the
// container; the options exist for tests.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseFrontmatter } from "@mariozechner/pi-coding-agent";
import { BrokerError, brokerJson, brokerPost, useBrokerSocket } from "./lib/broker.mjs";
import { InputError, parseTurn } from "./lib/input.mjs";
import {
	BROKER_SOCKET,
	CONTENT_DIR,
	LONG_POLL_MS,
	PERSONA_BYTES_MAX,
	REPLY_PACKET_BYTES_MAX,
	SHORT_CALL_MS,
	SMALL_ANSWER_BYTES_MAX,
	TURN_INPUT_BYTES_MAX,
	WORKSPACE,
} from "./lib/limits.mjs";
import { errorText, log } from "./lib/log.mjs";
import { holdsPrivateHistory } from "./lib/privacy.mjs";
import { ChannelSession, openSessionManager } from "./lib/session.mjs";
import { loadSkillIndex, skillsPromptBlock } from "./lib/skills.mjs";
import { FAILED, runTurn } from "./lib/turn.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function options(argv) {
	const o = { broker: BROKER_SOCKET, workspace: WORKSPACE, content: CONTENT_DIR };
	for (let i = 0; i < argv.length; i += 2) {
		const key = { "--broker": "broker", "--workspace": "workspace", "--content": "content" }[argv[i]];
		if (!key || i + 1 >= argv.length) {
			process.stderr.write("usage: main.mjs [--broker SOCKET] [--workspace DIR] [--content DIR]\n");
			process.exit(2);
		}
		o[key] = argv[i + 1];
	}
	return o;
}

/** The operator's content: the persona prompt and the skill index (a bad skill stops start-up). */
function loadContent(dir) {
	let persona = "";
	try {
		const buf = readFileSync(join(dir, "prompt.md"));
		if (buf.length > PERSONA_BYTES_MAX) throw new Error("prompt.md is larger than 256 KiB");
		persona = buf.toString("utf8").trim();
	} catch (e) {
		if (e.code !== "ENOENT") throw e;
	}
	const skillsDir = join(dir, "skills");
	const skills = loadSkillIndex(skillsDir, parseFrontmatter);
	return { persona, skills, skillsDir, skillsBlock: skillsPromptBlock(skills) };
}

/** Whether the channel's session retains private history (reported on /worker/ready). */
function privateHistory(channel, workspace) {
	try {
		const sm = channel.sm ?? openSessionManager(workspace, false);
		return holdsPrivateHistory(sm.getBranch());
	} catch (e) {
		// Unknown: claim it, so the host asks for the capabilities (which this worker has).
		log("session history unreadable", { error: errorText(e) });
		return true;
	}
}

/** POST /worker/ready until the broker takes it. */
async function announce(channel, workspace) {
	for (let attempt = 0; ; attempt++) {
		const body = { capabilities: { privateTo: true, readerRecords: true }, privateHistory: privateHistory(channel, workspace) };
		try {
			await brokerJson("/worker/ready", body, { timeoutMs: SHORT_CALL_MS, maxBytes: SMALL_ANSWER_BYTES_MAX });
			log("ready", { privateHistory: body.privateHistory });
			return;
		} catch (e) {
			if (attempt === 0 || attempt % 30 === 0) log("broker call failed", { path: "/worker/ready", status: e.status ?? 0, error: errorText(e) });
			await sleep(Math.min(1000 * (attempt + 1), 5000));
		}
	}
}

async function postResult(turnId, reply) {
	const body = JSON.stringify({ turnId, text: reply.text, files: reply.files });
	if (Buffer.byteLength(body) > REPLY_PACKET_BYTES_MAX) {
		log("reply packet too large", { turnId });
		return postResult(turnId, { text: FAILED.internal, files: [] });
	}
	try {
		await brokerJson("/worker/result", body, { timeoutMs: SHORT_CALL_MS * 4, maxBytes: SMALL_ANSWER_BYTES_MAX });
	} catch (e) {
		log("broker call failed", { path: "/worker/result", turnId, status: e.status ?? 0, code: e.code, error: errorText(e) });
	}
}

/** One long poll: the parsed turn input, null for no turn, or throws a BrokerError. */
async function nextTurn() {
	const { status, body } = await brokerPost("/worker/next", "{}", { timeoutMs: LONG_POLL_MS, maxBytes: TURN_INPUT_BYTES_MAX });
	if (status === 204) return null;
	if (status !== 200) {
		let code;
		try {
			code = JSON.parse(body.toString("utf8")).error;
		} catch {
			code = undefined;
		}
		throw new BrokerError("/worker/next", status, typeof code === "string" ? code.slice(0, 64) : undefined);
	}
	return JSON.parse(body.toString("utf8"));
}

async function serve(o) {
	useBrokerSocket(o.broker);
	const content = { ...loadContent(o.content), workspace: o.workspace };
	const channel = new ChannelSession({ workspace: o.workspace, persona: content.persona, skills: content.skills, skillsDir: content.skillsDir });
	log("starting", { skills: content.skills.length, persona: content.persona.length > 0 });
	await announce(channel, o.workspace);
	for (;;) {
		let raw;
		try {
			raw = await nextTurn();
		} catch (e) {
			log("broker call failed", { path: "/worker/next", status: e.status ?? 0, code: e.code, error: errorText(e) });
			if (e instanceof BrokerError && e.status === 429) {
				await sleep(1000);
				continue;
			}
			await sleep(500);
			await announce(channel, o.workspace); // the socket was re-created, or the broker forgot us
			continue;
		}
		if (raw === null) continue;
		let input;
		try {
			input = parseTurn(raw);
		} catch (e) {
			log("turn input refused", { field: e instanceof InputError ? e.field : "json", error: errorText(e) });
			const id = typeof raw?.turnId === "string" && /^[A-Za-z0-9_-]{1,64}$/.test(raw.turnId) ? raw.turnId : undefined;
			if (id) await postResult(id, { text: FAILED.internal, files: [] });
			continue;
		}
		log("turn", { turnId: input.turnId, images: input.images.length, attachments: input.attachments.length, effort: input.effort });
		const reply = await runTurn(channel, input, content);
		await postResult(input.turnId, reply);
	}
}

for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
process.on("unhandledRejection", (e) => log("unhandled rejection", { error: errorText(e) }));

serve(options(process.argv.slice(2))).catch((e) => {
	log("worker stopped", { error: errorText(e) });
	process.exit(1);
});
