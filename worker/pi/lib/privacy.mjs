// SPDX-License-Identifier: Apache-2.0
// Private tool exchanges in a shared channel session (seed: "Private tool exchanges in Pi
// mode"). Pure functions over Pi's messages and session entries; no I/O.
//
// - A host tool may tag its result privateTo: <principal id>. The worker persists the tag as
//   details.privateTo on the tool result, error results included.
// - Every turn starts with a reader record (a custom session entry): the reader (the
//   speaker's principal id), and whether a private, nonempty memory prompt block went into
//   that turn. The block itself is never persisted (it is part of that turn's system
//   prompt); the turn's reasoning may carry it, so the record marks it.
// - Requests (projectForReader): for another reader, a tagged exchange's call arguments and
//   result become placeholders while the call id and tool name stay paired; the owner sees
//   the original. Reasoning (thinking blocks) of earlier turns is never replayed.
// - Summaries (projectForSummary): no tagged exchange of anyone, no reasoning.
// - The last check before any model call (replayRefusal): a request that would carry, raw,
//   material the raw persisted branch marks as hidden from its reader is refused. Requests
//   are always projected, so this fires only when something replays raw history (a provider
//   that keeps its own history, a projection that failed): then the turn is refused rather
//   than leaked, also for material Pi has compacted away since.
// A turn whose memory block is empty or declared shared records privateMemory false, so a
// speaker with no private memory never blocks anyone merely by having spoken.

/** The custom entry type of reader records in the session file. */
export const READER_ENTRY = "roundtable-sandbox.reader";
/** What another reader sees instead of a private call's arguments and result. */
export const PLACEHOLDER = "(another person's private memory, hidden)";

/** The principal a tool result is private to, or undefined when it is public. */
export function privateOwner(details) {
	if (details === null || typeof details !== "object") return undefined;
	const p = details.privateTo;
	return typeof p === "string" && p.length > 0 ? p : undefined;
}

/** Whether reader may see an exchange owned by owner (undefined reader: nobody, for summaries). */
function visibleTo(owner, reader) {
	return owner === undefined || (reader !== undefined && owner === reader);
}

/** The messages of a list of session entries (message entries only, in order). */
export function entryMessages(entries) {
	const out = [];
	for (const e of entries) if (e && e.type === "message" && e.message) out.push(e.message);
	return out;
}

/**
 * What the raw persisted branch hides from reader (undefined: from everyone):
 *   ids       tool call ids whose result is tagged for someone else;
 *   thinking  the texts and signatures of reasoning in turns whose reader record says a
 *             private memory block of another reader went into them.
 * entries: the whole branch, root to leaf (compacted entries included).
 */
export function hiddenFromReader(entries, reader) {
	const ids = new Set();
	const thinking = new Set();
	let privateTurnOfOther = false;
	for (const e of entries) {
		if (!e || typeof e !== "object") continue;
		if (e.type === "custom" && e.customType === READER_ENTRY) {
			const d = e.data ?? {};
			privateTurnOfOther = d.privateMemory === true && !visibleTo(d.reader, reader);
			continue;
		}
		if (e.type !== "message" || !e.message) continue;
		const m = e.message;
		if (m.role === "toolResult" && !visibleTo(privateOwner(m.details), reader)) ids.add(m.toolCallId);
		if (m.role === "assistant" && privateTurnOfOther && Array.isArray(m.content)) {
			for (const b of m.content) {
				if (b?.type !== "thinking") continue;
				if (typeof b.thinking === "string" && b.thinking.trim()) thinking.add(`t:${b.thinking}`);
				if (typeof b.thinkingSignature === "string" && b.thinkingSignature) thinking.add(`s:${b.thinkingSignature}`);
			}
		}
	}
	return { ids, thinking };
}

/** Whether the raw branch retains private history (seed, "Worker capability handshake":
 * reported as privateHistory, compacted turns included). */
export function holdsPrivateHistory(entries) {
	for (const e of entries) {
		if (e?.type === "custom" && e.customType === READER_ENTRY && e.data?.privateMemory === true) return true;
		if (e?.type === "message" && e.message?.role === "toolResult" && privateOwner(e.message.details)) return true;
	}
	return false;
}

function hideMessage(m, hidden, dropThinking) {
	if (m.role === "assistant" && Array.isArray(m.content)) {
		let changed = false;
		const content = [];
		for (const b of m.content) {
			if (b?.type === "thinking" && dropThinking) {
				changed = true;
				continue;
			}
			if (b?.type === "toolCall" && hidden.has(b.id)) {
				changed = true;
				content.push({ ...b, arguments: { hidden: PLACEHOLDER } });
				continue;
			}
			content.push(b);
		}
		return changed ? { ...m, content } : m;
	}
	if (m.role === "toolResult" && hidden.has(m.toolCallId)) {
		const owner = privateOwner(m.details);
		return { ...m, content: [{ type: "text", text: PLACEHOLDER }], details: owner ? { privateTo: owner } : {} };
	}
	return m;
}

/** The call ids in messages whose result reader may not see. */
function hiddenIn(messages, reader) {
	const ids = new Set();
	for (const m of messages) if (m?.role === "toolResult" && !visibleTo(privateOwner(m.details), reader)) ids.add(m.toolCallId);
	return ids;
}

/**
 * A request's messages for reader: other readers' tagged exchanges as placeholders (call id
 * and name kept), reasoning of earlier turns dropped. branchHidden: ids the raw branch hides
 * from reader (pairs a call with a result that is no longer in messages). Returns a new array;
 * messages are not changed.
 */
export function projectForReader(messages, reader, branchHidden = new Set()) {
	const hidden = new Set([...branchHidden, ...hiddenIn(messages, reader)]);
	let running = -1;
	for (let i = messages.length - 1; i >= 0; i--) {
		if (messages[i]?.role === "user") {
			running = i;
			break;
		}
	}
	return messages.map((m, i) => hideMessage(m, hidden, i < running));
}

/** What a summary may see: no tagged exchange of anyone, no reasoning. branchHidden pairs
 * calls and results split across compaction boundaries. */
export function projectForSummary(messages, branchHidden = new Set()) {
	const hidden = new Set([...branchHidden, ...hiddenIn(messages, undefined)]);
	return messages.map((m) => hideMessage(m, hidden, true));
}

function isPlaceholderResult(content) {
	return Array.isArray(content) && content.length === 1 && content[0]?.type === "text" && content[0].text === PLACEHOLDER;
}

function isPlaceholderArgs(args) {
	return args !== null && typeof args === "object" && Object.keys(args).length === 1 && args.hidden === PLACEHOLDER;
}

/**
 * The refusal before a model call: the reason, when messages (the request's, as the provider
 * gets them) carry raw what hidden (hiddenFromReader of the raw branch) marks; else undefined.
 */
export function replayRefusal(messages, hidden) {
	for (const m of messages) {
		if (m?.role === "toolResult" && hidden.ids.has(m.toolCallId) && !isPlaceholderResult(m.content))
			return "the request replays a tool result private to another reader";
		if (m?.role !== "assistant" || !Array.isArray(m.content)) continue;
		for (const b of m.content) {
			if (b?.type === "toolCall" && hidden.ids.has(b.id) && !isPlaceholderArgs(b.arguments))
				return "the request replays a tool call private to another reader";
			if (
				b?.type === "thinking" &&
				((typeof b.thinking === "string" && hidden.thinking.has(`t:${b.thinking}`)) ||
					(typeof b.thinkingSignature === "string" && hidden.thinking.has(`s:${b.thinkingSignature}`)))
			)
				return "the request replays reasoning of a turn that carried another reader's private memory";
		}
	}
	return undefined;
}

/** The reader record of a turn. memory: the host's {text, visibility} or null. */
export function readerRecord(turnId, reader, memory) {
	const privateMemory = Boolean(memory && typeof memory.text === "string" && memory.text.length > 0 && memory.visibility !== "shared");
	return { turnId, reader, privateMemory };
}
