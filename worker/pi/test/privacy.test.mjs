// SPDX-License-Identifier: Apache-2.0
// lib/privacy.mjs: projection, summaries, reader records and the replay refusal.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
	PLACEHOLDER,
	READER_ENTRY,
	hiddenFromReader,
	holdsPrivateHistory,
	projectForReader,
	projectForSummary,
	readerRecord,
	replayRefusal,
} from "../lib/privacy.mjs";

const user = (text) => ({ role: "user", content: [{ type: "text", text }] });
const call = (id, name, args, thinking) => ({
	role: "assistant",
	content: [...(thinking ? [{ type: "thinking", thinking, thinkingSignature: `sig-${thinking}` }] : []), { type: "toolCall", id, name, arguments: args }],
});
const result = (id, text, details, isError = false) => ({ role: "toolResult", toolCallId: id, toolName: "t", content: [{ type: "text", text }], details, isError });
const reply = (text, thinking) => ({
	role: "assistant",
	content: [...(thinking ? [{ type: "thinking", thinking, thinkingSignature: `sig-${thinking}` }] : []), { type: "text", text }],
});
const record = (reader, privateMemory) => ({ type: "custom", customType: READER_ENTRY, data: { turnId: "t", reader, privateMemory } });
const entry = (message) => ({ type: "message", message });

const history = [
	user("alice asks"),
	call("c1", "lookup", { q: "tea" }, "I should look"),
	result("c1", "SECRET", { privateTo: "alice" }),
	reply("done", "reasoning of alice"),
	user("bob asks"),
	call("c2", "pub", { q: "x" }),
	result("c2", "PUBLIC", {}),
];

test("another reader sees placeholders, paired by id and name", () => {
	const out = projectForReader([...history, user("bob again")], "bob");
	assert.deepEqual(out[1].content, [{ type: "toolCall", id: "c1", name: "lookup", arguments: { hidden: PLACEHOLDER } }]);
	assert.deepEqual(out[2].content, [{ type: "text", text: PLACEHOLDER }]);
	assert.deepEqual(out[2].details, { privateTo: "alice" });
	assert.equal(out[2].toolCallId, "c1");
	assert.deepEqual(out[6].content, [{ type: "text", text: "PUBLIC" }]);
	assert.ok(!JSON.stringify(out).includes("SECRET") && !JSON.stringify(out).includes("tea"));
});

test("the owner sees the original; earlier reasoning is dropped for everyone", () => {
	const out = projectForReader([...history, user("alice again")], "alice");
	assert.deepEqual(out[1].content, [{ type: "toolCall", id: "c1", name: "lookup", arguments: { q: "tea" } }]);
	assert.equal(out[2].content[0].text, "SECRET");
	assert.ok(!JSON.stringify(out).includes("reasoning of alice"));
	assert.equal(history[2].content[0].text, "SECRET", "the input is not changed");
});

test("the running turn keeps its own reasoning", () => {
	const msgs = [user("q"), call("c9", "pub", {}, "thinking now"), result("c9", "ok", {})];
	const out = projectForReader(msgs, "bob");
	assert.equal(out[1].content[0].type, "thinking");
});

test("a call whose result is only in the raw branch is still hidden", () => {
	const msgs = [user("summary..."), call("c1", "lookup", { q: "tea" }), user("bob")];
	const hidden = hiddenFromReader(history.map(entry), "bob").ids;
	const out = projectForReader(msgs, "bob", hidden);
	assert.deepEqual(out[1].content[0].arguments, { hidden: PLACEHOLDER });
});

test("summaries see no tagged exchange of anyone and no reasoning", () => {
	const out = projectForSummary(history);
	assert.ok(!JSON.stringify(out).includes("SECRET") && !JSON.stringify(out).includes("tea"));
	assert.ok(!JSON.stringify(out).includes("reasoning"));
	assert.equal(out[5].content[0].arguments.q, "x");
	// tagged for the reader too (alice): a summary is for everyone.
	const errorTagged = [call("e1", "t", { a: 1 }), result("e1", "ERR-SECRET", { privateTo: "bob", isError: true }, true)];
	assert.ok(!JSON.stringify(projectForSummary(errorTagged)).includes("ERR-SECRET"));
});

test("reader records: private memory of another reader hides that turn's reasoning", () => {
	const branch = [record("alice", true), entry(user("a")), entry(reply("r", "alice-private-thought")), record("bob", false), entry(user("b")), entry(reply("r2", "bob-thought"))];
	const forBob = hiddenFromReader(branch, "bob");
	assert.ok(forBob.thinking.has("t:alice-private-thought") && forBob.thinking.has("s:sig-alice-private-thought"));
	assert.ok(!forBob.thinking.has("t:bob-thought"));
	assert.equal(hiddenFromReader(branch, "alice").thinking.size, 0);
});

test("the replay refusal: raw material hidden from the reader is refused, placeholders pass", () => {
	const branch = [record("alice", true), ...history.map(entry)];
	const hidden = hiddenFromReader(branch, "bob");
	assert.match(replayRefusal([...history, user("bob")], hidden), /replays/);
	assert.match(replayRefusal([result("c1", "SECRET", {})], hidden), /tool result private/);
	assert.equal(replayRefusal(projectForReader([...history, user("bob")], "bob", hidden.ids), hidden), undefined);
	assert.match(replayRefusal([call("c1", "lookup", { q: "tea" })], hidden), /tool call private/);
	assert.match(replayRefusal([reply("x", "I should look")], hidden), /reasoning/);
	// Nothing is hidden from the owner.
	assert.equal(replayRefusal(history, hiddenFromReader(branch, "alice")), undefined);
});

test("a turn with no private memory never taints; shared blocks do not either", () => {
	assert.equal(readerRecord("t", "a", null).privateMemory, false);
	assert.equal(readerRecord("t", "a", { text: "", visibility: "private" }).privateMemory, false);
	assert.equal(readerRecord("t", "a", { text: "facts", visibility: "shared" }).privateMemory, false);
	assert.equal(readerRecord("t", "a", { text: "facts", visibility: "private" }).privateMemory, true);
	const branch = [record("alice", false), entry(user("a")), entry(reply("r", "thought")), record("bob", false)];
	assert.equal(holdsPrivateHistory(branch), false);
	assert.equal(replayRefusal([reply("r", "thought")], hiddenFromReader(branch, "bob")), undefined);
	assert.equal(holdsPrivateHistory([record("alice", true)]), true);
	assert.equal(holdsPrivateHistory([entry(result("c", "x", { privateTo: "z" }))]), true);
});
