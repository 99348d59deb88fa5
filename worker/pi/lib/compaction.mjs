// SPDX-License-Identifier: Apache-2.0
// Compaction of the channel session (seed, "Compaction"): the tiers (tiers.mjs) decide when
// Pi compacts; this hook decides who summarises, and makes sure no summary ever sees a
// tagged private exchange or reasoning.
//
// Pi hands every session_before_compact handler, and then its own summary, the same
// preparation object. The hook first redacts it in place (projectForSummary, calls and
// results paired across the cut through the raw branch) and clamps the summary's output
// reserve; if that fails for any reason it cancels the compaction, since Pi would otherwise
// summarise the raw preparation (pi-notes finding 4: Pi swallows handler errors). Then:
//   - past the hard ceiling (hostBypass): Pi's own summary, whose model calls go through the
//     broker like any other;
//   - otherwise POST /worker/compact {"turnId", "request": PiCompactRequest} to the host
//     compactor; a 200 PiCompaction becomes the compaction (details.engine as the host set
//     it), anything else (204, an error status, no answer, an answer out of shape, more
//     than three requests in the turn) falls back to Pi's summary.
// Compactions are written to the session file by Pi (appendCompaction), so they survive
// container removal. Reports go to the host on the same route, {"turnId", "report": {...}}
// (brokerd/compact.h), at most sixteen a turn, before the turn's reply.

import { buildSessionContext, estimateTokens } from "@mariozechner/pi-coding-agent";
import { BrokerError, brokerJson } from "./broker.mjs";
import { COMPACT_ANSWER_BYTES_MAX, COMPACT_REPORTS_MAX, COMPACT_REQUESTS_MAX, SHORT_CALL_MS, SUMMARY_RESERVE_TOKENS } from "./limits.mjs";
import { errorText, log } from "./log.mjs";
import { entryMessages, hiddenFromReader, projectForSummary } from "./privacy.mjs";
import { compactionEngine, hostBypass } from "./tiers.mjs";

/** The latest compaction of branch: {id, engine, contextTokens (what it left, estimated)}. */
export function latestCompaction(branch) {
	let i = branch.length - 1;
	while (i >= 0 && branch[i].type !== "compaction") i--;
	if (i < 0) return undefined;
	const entry = branch[i];
	const ctx = buildSessionContext(branch.slice(0, i + 1), entry.id);
	let contextTokens = 0;
	for (const m of ctx.messages) contextTokens += estimateTokens(m);
	return { id: entry.id, engine: compactionEngine(entry), contextTokens };
}

/** Words for a report's reason: brokerd takes [a-z0-9 _-], at most 128. */
export function reportReason(text) {
	const s = String(text).toLowerCase().replace(/[^a-z0-9 _-]+/g, " ").replace(/\s+/g, " ").trim();
	return s.slice(0, 128) || "unknown";
}

function engineWord(s) {
	const w = String(s ?? "").replace(/[^A-Za-z0-9._-]/g, "").slice(0, 64);
	return w || "host";
}

const nonNegInt = (v) => Number.isSafeInteger(v) && v >= 0;

/** A host answer as Pi's compaction, or a reason it is out of shape. */
export function acceptCompaction(answer, prep) {
	if (!answer || typeof answer !== "object" || Array.isArray(answer)) return { why: "the answer is not an object" };
	if (typeof answer.summary !== "string" || answer.summary.length === 0) return { why: "the answer has no summary" };
	if (answer.firstKeptEntryId !== prep.firstKeptEntryId) return { why: "the answer keeps another first entry" };
	if (!nonNegInt(answer.tokensBefore)) return { why: "the answer has no tokensBefore" };
	if (answer.estimatedTokensAfter !== undefined && !nonNegInt(answer.estimatedTokensAfter)) return { why: "estimatedTokensAfter is not a count" };
	if (answer.details !== undefined && (answer.details === null || typeof answer.details !== "object" || Array.isArray(answer.details)))
		return { why: "details is not an object" };
	// 0.73.1's CompactionResult has no estimatedTokensAfter: it is kept in details.
	const details = { ...(answer.details ?? {}), engine: engineWord(answer.details?.engine) };
	if (answer.estimatedTokensAfter !== undefined) details.estimatedTokensAfter = answer.estimatedTokensAfter;
	return { compaction: { summary: answer.summary, firstKeptEntryId: answer.firstKeptEntryId, tokensBefore: answer.tokensBefore, details } };
}

/**
 * The compaction side of a channel session. ctx: {turn() (the running turn: turnId, signal,
 * timeLeftMs(), compactions {requests, reports, pending}), phase() (the compaction under
 * way: {reason, redacted, active}, see session.mjs), systemTokens() (the system prompt and
 * tools, estimated)}.
 */
export class Compaction {
	constructor(ctx) {
		this.ctx = ctx;
	}

	/** The session_before_compact handler (total: it never throws). */
	async beforeCompact(event) {
		const phase = this.ctx.phase();
		let prep;
		let request;
		try {
			prep = event.preparation;
			const branch = event.branchEntries;
			const hidden = hiddenFromReader(branch, undefined).ids;
			prep.messagesToSummarize = projectForSummary(prep.messagesToSummarize, hidden);
			prep.turnPrefixMessages = projectForSummary(prep.turnPrefixMessages, hidden);
			prep.settings = { ...prep.settings, reserveTokens: Math.min(prep.settings.reserveTokens, SUMMARY_RESERVE_TOKENS) };
			const start = branch.findIndex((e) => e.id === prep.firstKeptEntryId);
			const kept = projectForSummary(start < 0 ? [] : entryMessages(branch.slice(start)), hidden);
			const { read, written, edited } = prep.fileOps;
			const modified = new Set([...written, ...edited]);
			request = {
				reason: phase.reason ?? "threshold",
				tokensBefore: prep.tokensBefore,
				firstKeptEntryId: prep.firstKeptEntryId,
				isSplitTurn: prep.isSplitTurn,
				messagesToSummarize: prep.messagesToSummarize,
				turnPrefixMessages: prep.turnPrefixMessages,
				keptMessages: kept,
				...(prep.previousSummary === undefined ? {} : { previousSummary: prep.previousSummary }),
				...(event.customInstructions === undefined ? {} : { customInstructions: event.customInstructions }),
				readFiles: [...read].filter((f) => !modified.has(f)).sort(),
				modifiedFiles: [...modified].sort(),
			};
			phase.redacted = true;
		} catch (e) {
			log("compaction failed", { reason: "the preparation could not be redacted", error: errorText(e) });
			phase.redacted = false;
			return { cancel: true };
		}
		try {
			return await this.askHost(event, prep, request);
		} catch (e) {
			log("compaction falls back to Pi's summary", { fallback: "the host compactor request failed", error: errorText(e) });
			return undefined;
		}
	}

	async askHost(event, prep, request) {
		const turn = this.ctx.turn();
		const latest = latestCompaction(event.branchEntries);
		const bypass = hostBypass(prep.tokensBefore, latest);
		if (bypass) {
			log("compaction skips the host compactor", { reason: bypass, tokensBefore: prep.tokensBefore });
			this.report({ event: "skipped", trigger: request.reason, tokensBefore: prep.tokensBefore, reason: reportReason(bypass) });
			return undefined;
		}
		if (!turn) return undefined;
		if (turn.compactions.requests >= COMPACT_REQUESTS_MAX) {
			this.fallback("three host compactions in this turn already", request);
			return undefined;
		}
		turn.compactions.requests++;
		let answer;
		try {
			// The host bounds the compactor (its timeout, or half the turn's time left); the
			// worker's own bound only keeps a lost answer from holding the turn.
			answer = await brokerJson(
				"/worker/compact",
				JSON.stringify({ turnId: turn.turnId, request }),
				{ signal: AbortSignal.any([event.signal, turn.signal]), timeoutMs: Math.max(1, turn.timeLeftMs()), maxBytes: COMPACT_ANSWER_BYTES_MAX },
			);
		} catch (e) {
			const why =
				e instanceof BrokerError && e.status === 413 ? "the compaction request is larger than the host takes"
				: e instanceof BrokerError && e.status ? `the broker answered ${e.status}`
				: "the host compactor gave no answer";
			this.fallback(why, request);
			return undefined;
		}
		if (answer === undefined) {
			// 204: the host declined or fell back, and logged why.
			log("compaction falls back to Pi's summary", { fallback: "the host answered 204" });
			return undefined;
		}
		const accepted = acceptCompaction(answer, prep);
		if (!accepted.compaction) {
			this.fallback(`the host compactor's answer is out of shape: ${accepted.why}`, request);
			return undefined;
		}
		return { compaction: accepted.compaction };
	}

	fallback(why, request) {
		log("compaction falls back to Pi's summary", { fallback: why });
		this.report({ event: "fallback", trigger: request.reason, tokensBefore: request.tokensBefore, reason: reportReason(why) });
	}

	/** compaction_end: log it and tell the host (conversation compacted / compaction failed). */
	ended(event, session, nextCompactionAt) {
		const r = event.result;
		if (r) {
			const latest = latestCompaction(session.sessionManager.getBranch());
			const engine = r.details?.engine && latest?.engine === "host" ? engineWord(r.details.engine) : "pi";
			const contextAfter = (latest?.contextTokens ?? 0) + this.ctx.systemTokens();
			const fields = {
				trigger: event.reason,
				engine,
				tokensBefore: r.tokensBefore,
				...(nonNegInt(r.details?.estimatedTokensAfter) ? { tokensAfter: r.details.estimatedTokensAfter } : {}),
				contextAfter,
				nextCompactionAt,
			};
			log("conversation compacted", fields);
			this.report({ event: "compacted", ...fields });
		} else {
			const reason = event.aborted ? "compaction was cancelled" : event.errorMessage ?? "compaction failed";
			log("compaction failed", { trigger: event.reason, aborted: event.aborted, error: errorText(reason) });
			this.report({ event: "failed", trigger: event.reason, reason: reportReason(reason) });
		}
	}

	/** Send a report while the turn is bound (at most sixteen a turn); the turn waits for them. */
	report(report) {
		const turn = this.ctx.turn();
		if (!turn || turn.compactions.reports >= COMPACT_REPORTS_MAX) return;
		turn.compactions.reports++;
		const sending = brokerJson("/worker/compact", JSON.stringify({ turnId: turn.turnId, report }), {
			timeoutMs: SHORT_CALL_MS,
			maxBytes: COMPACT_ANSWER_BYTES_MAX,
		}).catch((e) => log("compaction report failed", { error: errorText(e) }));
		turn.compactions.pending.add(sending);
		sending.finally(() => turn.compactions.pending.delete(sending));
	}
}
