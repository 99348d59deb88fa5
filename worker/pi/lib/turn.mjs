// SPDX-License-Identifier: Apache-2.0
// One admitted turn: from the handed-out input to the reply packet.

import { TEXT_CHARS_MAX, TURN_STOP_MARGIN_MS } from "./limits.mjs";
import { errorText, log } from "./log.mjs";
import { imagesForModel } from "./images.mjs";
import { Outbox } from "./outbox.mjs";
import { readerRecord } from "./privacy.mjs";
import { systemPrompt, userText } from "./prompt.mjs";

/** Credential-bearing calls of a turn (model, host tool, MCP): seed maxCalls. Refused calls
 * count at the broker too; the worker stops asking once the budget is gone. */
export class Budget {
	constructor(max) {
		this.max = max;
		this.used = 0;
	}

	take() {
		if (this.used >= this.max) return false;
		this.used++;
		return true;
	}
}

/** What the session's hooks, tools and checks read while a turn runs. */
export class TurnState {
	constructor(input, { workspace, persona, skillsBlock }, startedMs = Date.now()) {
		this.turnId = input.turnId;
		this.reader = input.reader;
		this.maxOutputTokens = input.maxOutputTokens;
		this.budget = new Budget(input.maxCalls);
		this.outbox = new Outbox(workspace, input.turnId);
		this.deadlineMs = startedMs + Math.max(0, input.turnTimeoutMs - TURN_STOP_MARGIN_MS);
		this.controller = new AbortController();
		this.continues = 0;
		this.compactions = { requests: 0, reports: 0, pending: new Set() };
		this.refused = undefined;
		this.systemPrompt = systemPrompt({
			persona,
			profile: input.prompt,
			skillsBlock,
			timeZone: input.timeZone,
			now: input.now,
			memory: input.memory,
		});
	}

	get signal() {
		return this.controller.signal;
	}

	timeLeftMs() {
		return this.deadlineMs - Date.now();
	}

	/** signal combined with the turn's own (its deadline). */
	signalWith(signal) {
		return signal ? AbortSignal.any([signal, this.signal]) : this.signal;
	}
}

/** Words the guests see when a turn fails; the cause goes to the log only. */
export const FAILED = {
	refused:
		"I cannot answer this here: the conversation would have to show me another person's private memory. Ask the operator to start this channel fresh.",
	deadline: "I ran out of time on this message.",
	model: "I could not get an answer from the model this time.",
	internal: "Something went wrong on my side with this message.",
};

/** The text of the last assistant message of the turn, cut to 100,000 characters. */
function replyText(message) {
	const text = (message?.content ?? [])
		.filter((b) => b?.type === "text" && typeof b.text === "string")
		.map((b) => b.text)
		.join("")
		.trim();
	const chars = [...text];
	return chars.length > TEXT_CHARS_MAX ? `${chars.slice(0, TEXT_CHARS_MAX - 1).join("")}…` : text;
}

/**
 * Run input (parseTurn's) on channel (a ChannelSession). Returns the reply packet's
 * {text, files}; never throws: a failure becomes one of the FAILED texts and a log line.
 */
export async function runTurn(channel, input, content) {
	const started = Date.now();
	let turn;
	try {
		const session = await channel.ensure(input);
		turn = new TurnState(input, content, started);
		channel.turn = turn;
		const timer = setTimeout(() => {
			log("turn deadline reached", { turnId: turn.turnId });
			turn.controller.abort();
			void channel.abort();
		}, Math.max(0, turn.timeLeftMs()));
		let last;
		const off = session.subscribe((e) => {
			if (e.type === "message_end" && e.message?.role === "assistant") last = e.message;
		});
		try {
			process.env.TZ = input.timeZone; // node re-reads TZ when it changes: Date and Intl follow
			session.setThinkingLevel(input.effort);
			channel.recordReader(readerRecord(turn.turnId, turn.reader, input.memory));
			const { images, skipped } = imagesForModel(input.images);
			await session.prompt(userText(input, skipped), { images: images.length ? images : undefined, expandPromptTemplates: false, source: "rpc" });
			await channel.settle(turn);
		} finally {
			clearTimeout(timer);
			off();
		}
		const files = turn.outbox.packet();
		if (turn.refused) {
			log("turn refused", { turnId: turn.turnId, reason: turn.refused });
			return { text: FAILED.refused, files: [] };
		}
		if (turn.signal.aborted) return { text: FAILED.deadline, files: [] };
		if (!last || last.stopReason === "error" || last.stopReason === "aborted") {
			log("turn failed", { turnId: turn.turnId, stopReason: last?.stopReason ?? "none", error: errorText(last?.errorMessage ?? "no answer") });
			return { text: FAILED.model, files: [] };
		}
		const text = replyText(last);
		log("turn answered", { turnId: turn.turnId, ms: Date.now() - started, calls: turn.budget.used, files: files.length });
		return { text: text || "(no text)", files };
	} catch (e) {
		log("turn failed", { turnId: input.turnId, error: errorText(e) });
		return { text: FAILED.internal, files: [] };
	} finally {
		if (turn) await Promise.allSettled([...turn.compactions.pending]);
		channel.turn = undefined;
	}
}
