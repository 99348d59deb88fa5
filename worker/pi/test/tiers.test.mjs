// SPDX-License-Identifier: Apache-2.0
// lib/tiers.mjs: when the session compacts, and who summarises.
import assert from "node:assert/strict";
import { test } from "node:test";
import { compactionEngine, compactionTrigger, hostBypass } from "../lib/tiers.mjs";

const R = 16_384;

test("small windows keep Pi's own threshold", () => {
	assert.equal(compactionTrigger(200_000, R, undefined), undefined);
	assert.equal(compactionTrigger(300_000 + R, R, undefined), undefined);
});

test("large windows compact at 300,000 until a compaction leaves more than 250,000", () => {
	assert.equal(compactionTrigger(1_000_000, R, undefined), 300_000);
	assert.equal(compactionTrigger(1_000_000, R, { engine: "host", contextTokens: 250_000 }), 300_000);
	// The 50,000-token rule: the next one moves to the hard ceiling.
	assert.equal(compactionTrigger(1_000_000, R, { engine: "host", contextTokens: 250_001 }), 500_000);
	// ... where the window reaches it; otherwise Pi's own threshold.
	assert.equal(compactionTrigger(400_000, R, { engine: "host", contextTokens: 260_000 }), undefined);
	// Pi's summary that left the context near the ceiling: Pi's own threshold.
	assert.equal(compactionTrigger(1_000_000, R, { engine: "pi", contextTokens: 450_001 }), undefined);
	assert.equal(compactionTrigger(1_000_000, R, { engine: "pi", contextTokens: 450_000 }), 500_000);
});

test("past the hard ceiling the host compactor is skipped", () => {
	assert.equal(hostBypass(500_000, undefined), undefined);
	assert.equal(hostBypass(500_001, undefined), "above the hard ceiling");
	assert.match(hostBypass(300_000, { engine: "host", contextTokens: 500_001 }), /left the context above/);
	assert.equal(hostBypass(300_000, { engine: "pi", contextTokens: 500_001 }), undefined);
	assert.equal(compactionEngine({ fromHook: true }), "host");
	assert.equal(compactionEngine({ fromHook: false }), "pi");
});
