// SPDX-License-Identifier: Apache-2.0
// The turn input handed out on /worker/next (rich-design.md section 3: statd's input plus
// what brokerd adds). brokerd built and checked it; the worker still checks every field it
// uses, with the seed's bounds, and takes nothing else from it.

import {
	ATTACHMENTS_MAX,
	IMAGE_BYTES_MAX,
	IMAGES_IN_MAX,
	IMAGES_TOTAL_MAX,
	MAX_CALLS_DEFAULT,
	MEMORY_CHARS_MAX,
	SPEAKER_FIELD_MAX,
	TEXT_CHARS_MAX,
	TURN_TIMEOUT_MS_DEFAULT,
} from "./limits.mjs";

export class InputError extends Error {
	constructor(field, why) {
		super(`turn input: ${field} ${why}`);
		this.name = "InputError";
		this.field = field;
	}
}

const IMAGE_MIMES = new Set(["image/png", "image/jpeg", "image/webp", "image/gif"]);
const EFFORTS = new Set(["low", "medium", "high", "xhigh"]);
const TOOLS_MAX = 512;
const PROMPT_CHARS_MAX = 1_000_000;
const TOOL_TEXT_MAX = 64 * 1024;
/** What a tool's route may be: brokerd's /tools/<name> or /mcp/<server> (configured names
 * are [a-z][a-z0-9_]{0,47}). */
const ROUTE = /^\/(tools|mcp)\/[a-z][a-z0-9_]{0,47}$/;

function chars(s) {
	let n = 0;
	for (const _ of s) n++;
	return n;
}

function str(o, key, { max = Infinity, min = 0, optional = false, maxChars } = {}) {
	const v = o[key];
	if (v === undefined || v === null) {
		if (optional) return undefined;
		throw new InputError(key, "is missing");
	}
	if (typeof v !== "string") throw new InputError(key, "is not a string");
	if (v.length < min || v.length > max) throw new InputError(key, "has the wrong length");
	if (maxChars !== undefined && v.length > maxChars && chars(v) > maxChars) throw new InputError(key, "is too long");
	if (v.includes("\0")) throw new InputError(key, "holds a NUL");
	return v;
}

function int(o, key, min, max, fallback) {
	const v = o[key];
	if (v === undefined || v === null) {
		if (fallback !== undefined) return fallback;
		throw new InputError(key, "is missing");
	}
	if (!Number.isSafeInteger(v) || v < min || v > max) throw new InputError(key, "is out of range");
	return v;
}

function obj(v, key) {
	if (v === null || typeof v !== "object" || Array.isArray(v)) throw new InputError(key, "is not an object");
	return v;
}

function arr(v, key, max) {
	if (v === undefined || v === null) return [];
	if (!Array.isArray(v)) throw new InputError(key, "is not an array");
	if (v.length > max) throw new InputError(key, "has too many items");
	return v;
}

/** Decoded size of canonical base64 text, or -1 when it is not base64. */
export function base64Bytes(s) {
	if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return -1;
	const pad = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
	return (s.length / 4) * 3 - pad;
}

function timeZoneOk(tz) {
	try {
		new Intl.DateTimeFormat("en-US", { timeZone: tz }).format(0);
		return true;
	} catch {
		return false;
	}
}

function parseTool(t, i) {
	const key = `tools[${i}]`;
	obj(t, key);
	const name = str(t, "name", { min: 1, max: 128 });
	const route = str(t, "route", { min: 1, max: 64 });
	if (!ROUTE.test(route)) throw new InputError(`${key}.route`, "is not a broker tool route");
	const description = str(t, "description", { optional: true, max: TOOL_TEXT_MAX }) ?? "";
	const parameters = t.parameters === undefined || t.parameters === null ? { type: "object" } : obj(t.parameters, `${key}.parameters`);
	const mcpTool = route.startsWith("/mcp/") ? str(t, "mcpTool", { min: 1, max: 128 }) : undefined;
	return { name, route, description, parameters, mcpTool };
}

/**
 * Check a parsed turn input; returns the fields the worker uses, normalised. Throws an
 * InputError naming the field for anything out of shape or bounds.
 */
export function parseTurn(o) {
	obj(o, "input");
	if (o.v !== 1) throw new InputError("v", "is not 1");
	const turnId = str(o, "turnId", { min: 1, max: 64 });
	if (!/^[A-Za-z0-9_-]+$/.test(turnId)) throw new InputError("turnId", "has characters outside [A-Za-z0-9_-]");
	const sp = obj(o.speaker, "speaker");
	const speaker = {
		id: str(sp, "id", { min: 1, max: 4 * SPEAKER_FIELD_MAX, maxChars: SPEAKER_FIELD_MAX }),
		name: str(sp, "name", { max: 4 * SPEAKER_FIELD_MAX, maxChars: SPEAKER_FIELD_MAX }),
		principalId: str(sp, "principalId", { optional: true, max: 4 * SPEAKER_FIELD_MAX, maxChars: SPEAKER_FIELD_MAX }) ?? "",
	};
	const text = str(o, "text", { max: 4 * TEXT_CHARS_MAX, maxChars: TEXT_CHARS_MAX });
	let total = 0;
	const images = arr(o.images, "images", IMAGES_IN_MAX).map((im, i) => {
		obj(im, `images[${i}]`);
		const mime = str(im, "mime", { max: 64 });
		if (!IMAGE_MIMES.has(mime)) throw new InputError(`images[${i}].mime`, "is not an image type the model takes");
		const data = str(im, "data", { max: Math.ceil(IMAGE_BYTES_MAX / 3) * 4 });
		const n = base64Bytes(data);
		if (n < 0) throw new InputError(`images[${i}].data`, "is not base64");
		total += n;
		return { mime, data, bytes: n };
	});
	if (total > IMAGES_TOTAL_MAX) throw new InputError("images", "are larger than 64 MiB in all");
	const attachments = arr(o.attachments, "attachments", ATTACHMENTS_MAX).map((a, i) => {
		obj(a, `attachments[${i}]`);
		return {
			name: str(a, "name", { min: 1, max: 1024 }),
			path: str(a, "path", { min: 1, max: 4096 }),
			mime: str(a, "mime", { min: 1, max: 255 }),
			bytes: int(a, "bytes", 0, Number.MAX_SAFE_INTEGER),
		};
	});
	let timeZone = str(o, "timeZone", { optional: true, max: 64 }) ?? "UTC";
	if (!timeZoneOk(timeZone)) throw new InputError("timeZone", "is not a time zone this runtime knows");
	const now = str(o, "now", { optional: true, max: 64 });
	const startFresh = o.startFresh === true;
	const model = str(o, "model", { min: 1, max: 128 });
	const maxOutputTokens = int(o, "maxOutputTokens", 1, 1_000_000);
	const prompt = str(o, "prompt", { optional: true, max: 4 * PROMPT_CHARS_MAX, maxChars: PROMPT_CHARS_MAX }) ?? "";
	const effort = o.effort === undefined || o.effort === null ? "medium" : str(o, "effort", { max: 16 });
	if (!EFFORTS.has(effort)) throw new InputError("effort", "is not low, medium, high or xhigh");
	let memory = null;
	if (o.memory !== undefined && o.memory !== null) {
		const m = obj(o.memory, "memory");
		const mtext = str(m, "text", { max: 4 * MEMORY_CHARS_MAX, maxChars: MEMORY_CHARS_MAX });
		const visibility = str(m, "visibility", { max: 16 });
		if (visibility !== "private" && visibility !== "shared") throw new InputError("memory.visibility", "is not private or shared");
		memory = { text: mtext, visibility };
	}
	const tools = arr(o.tools, "tools", TOOLS_MAX).map(parseTool);
	const limits = o.limits === undefined || o.limits === null ? {} : obj(o.limits, "limits");
	return {
		turnId,
		speaker,
		reader: speaker.principalId || speaker.id,
		text,
		images,
		attachments,
		timeZone,
		now,
		startFresh,
		model,
		maxOutputTokens,
		prompt,
		effort,
		memory,
		tools,
		requireCapabilities: o.requireCapabilities === true,
		maxCalls: int(limits, "maxCalls", 1, 1_000_000, MAX_CALLS_DEFAULT),
		turnTimeoutMs: int(limits, "turnTimeoutMs", 0, 3_600_000, TURN_TIMEOUT_MS_DEFAULT),
	};
}
