// SPDX-License-Identifier: Apache-2.0
// Compaction tiers (seed, "Compaction"; the core's tiers, as the host's own sessions use
// them). Pure functions.
//
// Pi compacts when the context passes window - reserveTokens. The worker moves that point:
// - a model whose window leaves more than 300,000 tokens (window - reserve > 300k) compacts
//   at 300,000, through the host compactor;
// - a compaction that left the context within 50,000 tokens of that threshold (more than
//   250,000 left) moves the next one to the hard ceiling, 500,000 (where the window allows
//   it; otherwise Pi's own threshold), so it does not fire again on the next request;
// - past 500,000 a compaction is Pi's own summary, never the host's; and when Pi's own
//   summary left the context near the ceiling (more than 450,000), Pi's own threshold applies.
// Small windows keep Pi's own threshold. "Left" is the estimated size (Pi's chars/4) of what
// the latest compaction kept: its summary and the messages from its first kept entry on.

import { COMPACT_HEADROOM_TOKENS, HARD_COMPACT_TOKENS, SOFT_COMPACT_TOKENS } from "./limits.mjs";

/** Who wrote a compaction entry: the host compactor (returned through the worker's hook,
 * Pi records fromHook true) or Pi's own summary. */
export function compactionEngine(entry) {
	return entry?.fromHook === true ? "host" : "pi";
}

/**
 * The context size past which the session compacts, or undefined for Pi's own threshold
 * (window - reserve). latest: {engine, contextTokens} of the latest compaction or undefined.
 */
export function compactionTrigger(contextWindow, reserveTokens, latest) {
	const native = contextWindow - reserveTokens;
	if (native <= SOFT_COMPACT_TOKENS) return undefined;
	const left = latest?.contextTokens ?? 0;
	if (left <= SOFT_COMPACT_TOKENS - COMPACT_HEADROOM_TOKENS) return SOFT_COMPACT_TOKENS;
	if (native <= HARD_COMPACT_TOKENS) return undefined;
	const piStalled = latest?.engine === "pi" && left > HARD_COMPACT_TOKENS - COMPACT_HEADROOM_TOKENS;
	return piStalled ? undefined : HARD_COMPACT_TOKENS;
}

/** Why a compaction of tokensBefore must be Pi's summary rather than the host's (seed:
 * "compaction skips the host compactor"), or undefined. The words fit a report's reason. */
export function hostBypass(tokensBefore, latest) {
	if (tokensBefore > HARD_COMPACT_TOKENS) return "above the hard ceiling";
	if (latest?.engine === "host" && latest.contextTokens > HARD_COMPACT_TOKENS)
		return "the host compactor left the context above the hard ceiling";
	return undefined;
}
