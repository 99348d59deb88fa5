// SPDX-License-Identifier: Apache-2.0
// The only tools the model gets (seed, "Worker content and files": what the operator
// declared): the profile's host tools (POST /tools/<name>) and MCP tools (POST
// /mcp/<server>, tools/call of a listed tool) as brokerd hands them out with each turn,
// read_skill when the image has skills, and reply_file for reply files. Pi's built-in
// read, bash, edit and write tools are never registered.
//
// A host tool's answer may be {"result": TEXT, "privateTo": PRINCIPAL}: the worker keeps
// the tag as details.privateTo on the tool result, for error results too (a tool cannot set
// isError itself without losing details, so details.isError marks it and the session's
// tool_result hook turns it into the result's isError).

import { defineTool } from "@mariozechner/pi-coding-agent";
import { BrokerError, brokerJson } from "./broker.mjs";
import { TOOL_ANSWER_BYTES_MAX } from "./limits.mjs";
import { errorText, log } from "./log.mjs";
import { OutboxError } from "./outbox.mjs";
import { SKILL_FILE, SkillError, gateOwner, readSkillFile, skillRead } from "./skills.mjs";

const ANTHROPIC_TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const PRINCIPAL_MAX_BYTES = 256;

/** A refusal or failure the model sees as the tool's error result. */
function failed(text, details = {}) {
	return { content: [{ type: "text", text }], details: { ...details, isError: true } };
}

function textResult(text, details = {}) {
	return { content: [{ type: "text", text }], details };
}

/** A tool name the Anthropic API takes, unique among taken. */
export function modelToolName(name, taken) {
	let base = String(name).replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64) || "tool";
	let n = base;
	for (let k = 2; taken.has(n); k++) n = `${base.slice(0, 60)}_${k}`;
	if (!ANTHROPIC_TOOL_NAME.test(n)) throw new Error("tool name");
	taken.add(n);
	return n;
}

function principalOk(p) {
	return typeof p === "string" && p.length > 0 && Buffer.byteLength(p, "utf8") <= PRINCIPAL_MAX_BYTES && !/[\u0000-\u001f\u007f]/.test(p);
}

/** The JSON Schema Pi gets for a declared tool: an object schema, as the broker offers it. */
function objectSchema(parameters) {
	if (parameters && typeof parameters === "object" && parameters.type === "object") return parameters;
	return { type: "object", properties: {} };
}

/**
 * Gate and budget checks common to broker tools. turn(): the running turn's state
 * ({budget, signal}); skills and messages() for the gates. Returns an error result or undefined.
 */
function refusal(name, turn, skills, messages) {
	const owner = gateOwner(skills, name);
	if (owner && !skillRead(messages(), owner))
		return failed(`Read the ${owner} skill with read_skill first; it sets how ${name} is used here.`);
	const t = turn();
	if (!t) return failed("no turn is running");
	if (!t.budget.take()) return failed("this turn has used up its calls");
	return undefined;
}

function hostTool(entry, modelName, ctx) {
	const path = entry.route;
	return defineTool({
		name: modelName,
		label: modelName,
		description: entry.description,
		parameters: objectSchema(entry.parameters),
		async execute(_toolCallId, params, signal) {
			const refused = refusal(modelName, ctx.turn, ctx.skills, ctx.messages);
			if (refused) return refused;
			let answer;
			try {
				answer = await brokerJson(path, params ?? {}, { signal: ctx.turn().signalWith(signal), maxBytes: TOOL_ANSWER_BYTES_MAX });
			} catch (e) {
				log("tool failed", { tool: modelName, status: e instanceof BrokerError ? e.status : 0, code: e?.code, error: errorText(e) });
				return failed(`The tool failed${e instanceof BrokerError && e.code ? ` (${e.code})` : ""}.`);
			}
			if (!answer || typeof answer !== "object" || typeof answer.result !== "string") {
				log("tool failed", { tool: modelName, error: "the broker's answer has no result text" });
				return failed("The tool's answer was malformed.");
			}
			const details = {};
			if (answer.privateTo !== undefined) {
				if (!principalOk(answer.privateTo)) {
					// Seed: a bad tag is never a reason to show the result: withhold it.
					log("tool failed", { tool: modelName, error: "privateTo is not a principal id" });
					return failed("The tool's answer was malformed.");
				}
				details.privateTo = answer.privateTo;
			}
			if (answer.isError === true) return failed(answer.result, details);
			return textResult(answer.result, details);
		},
	});
}

function mcpText(result) {
	const parts = [];
	for (const c of Array.isArray(result?.content) ? result.content : []) {
		if (c?.type === "text" && typeof c.text === "string") parts.push(c.text);
		else if (c && typeof c === "object") parts.push(`[${String(c.type ?? "content").slice(0, 32)} content left out]`);
	}
	if (parts.length === 0 && result?.structuredContent !== undefined) parts.push(JSON.stringify(result.structuredContent));
	return parts.join("\n");
}

function mcpTool(entry, modelName, ctx) {
	const path = entry.route;
	let rpcId = 0;
	return defineTool({
		name: modelName,
		label: modelName,
		description: entry.description,
		parameters: objectSchema(entry.parameters),
		async execute(_toolCallId, params, signal) {
			const refused = refusal(modelName, ctx.turn, ctx.skills, ctx.messages);
			if (refused) return refused;
			const request = { jsonrpc: "2.0", id: ++rpcId, method: "tools/call", params: { name: entry.mcpTool, arguments: params ?? {} } };
			let answer;
			try {
				answer = await brokerJson(path, request, { signal: ctx.turn().signalWith(signal), maxBytes: TOOL_ANSWER_BYTES_MAX });
			} catch (e) {
				log("tool failed", { tool: modelName, status: e instanceof BrokerError ? e.status : 0, code: e?.code, error: errorText(e) });
				return failed(`The tool failed${e instanceof BrokerError && e.code ? ` (${e.code})` : ""}.`);
			}
			if (!answer || answer.jsonrpc !== "2.0" || answer.id !== request.id) {
				log("tool failed", { tool: modelName, error: "not a JSON-RPC answer to the call" });
				return failed("The tool's answer was malformed.");
			}
			if (answer.error) {
				log("tool failed", { tool: modelName, error: "the MCP server answered an error" });
				return failed(`The tool failed: ${String(answer.error.message ?? "error").slice(0, 500)}`);
			}
			const text = mcpText(answer.result);
			return answer.result?.isError === true ? failed(text) : textResult(text);
		},
	});
}

function readSkillTool(ctx) {
	return defineTool({
		name: "read_skill",
		label: "read_skill",
		description: "Read a skill's instructions (its SKILL.md) or a file the skill refers to.",
		parameters: {
			type: "object",
			properties: {
				skill: { type: "string", description: "The skill's name, from the available skills." },
				path: { type: "string", description: `A file inside the skill's directory; default ${SKILL_FILE}.` },
			},
			required: ["skill"],
		},
		async execute(_toolCallId, params) {
			try {
				const { text, file } = readSkillFile(ctx.skillsDir, ctx.skills, params.skill, params.path);
				return textResult(text, { skill: params.skill, file });
			} catch (e) {
				if (e instanceof SkillError) return failed(e.message);
				log("tool failed", { tool: "read_skill", error: errorText(e) });
				return failed("The skill cannot be read.");
			}
		},
	});
}

function replyFileTool(ctx) {
	return defineTool({
		name: "reply_file",
		label: "reply_file",
		description:
			"Attach a file to your reply: at most 10 files of 10 MiB each, 50 MiB in all. content is the file's text, or its bytes in base64 with encoding \"base64\".",
		parameters: {
			type: "object",
			properties: {
				name: { type: "string", description: "The file name, such as notes.md." },
				content: { type: "string" },
				encoding: { type: "string", enum: ["utf-8", "base64"] },
				mime: { type: "string", description: "The media type, such as text/markdown (optional)." },
			},
			required: ["name", "content"],
		},
		async execute(_toolCallId, params) {
			const owner = gateOwner(ctx.skills, "reply_file");
			if (owner && !skillRead(ctx.messages(), owner)) return failed(`Read the ${owner} skill with read_skill first; it sets how reply_file is used here.`);
			const t = ctx.turn();
			if (!t) return failed("no turn is running");
			let bytes;
			if (params.encoding === "base64") {
				if (!/^[A-Za-z0-9+/]*={0,2}$/.test(params.content) || params.content.length % 4 !== 0) return failed("content is not base64");
				bytes = Buffer.from(params.content, "base64");
			} else {
				bytes = Buffer.from(params.content, "utf8");
			}
			try {
				const name = t.outbox.add(params.name, bytes, params.mime);
				return textResult(`Attached ${name} (${bytes.length} bytes) to the reply.`, { file: name });
			} catch (e) {
				if (e instanceof OutboxError) return failed(e.message);
				log("tool failed", { tool: "reply_file", error: errorText(e) });
				return failed("The file could not be stored.");
			}
		},
	});
}

/**
 * Pi tool definitions for a turn's declared tools (the input's tools: {name, route,
 * description, parameters, mcpTool?}) plus the worker's own. ctx: {turn() (the running
 * turn's state), messages() (what the model sees), skills, skillsDir}.
 */
export function buildTools(declared, ctx) {
	const taken = new Set(["reply_file", "read_skill"]);
	const tools = [];
	for (const entry of declared) {
		const name = modelToolName(entry.name, taken);
		tools.push(entry.route.startsWith("/mcp/") ? mcpTool(entry, name, ctx) : hostTool(entry, name, ctx));
	}
	if (ctx.skills.length > 0) tools.push(readSkillTool(ctx));
	tools.push(replyFileTool(ctx));
	return tools;
}
