// SPDX-License-Identifier: Apache-2.0
// lib/outbox.mjs (reply files), lib/images.mjs (images for the model), lib/input.mjs.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { imagesForModel } from "../lib/images.mjs";
import { InputError, base64Bytes, parseTurn } from "../lib/input.mjs";
import { Outbox, OutboxError, fileMime, safeFileName } from "../lib/outbox.mjs";

const MiB = 1024 * 1024;

function workspace() {
	return mkdtempSync(join(tmpdir(), "rts-pi-test-"));
}

test("ten files of 10 MiB each, 50 MiB in all", () => {
	const ws = workspace();
	try {
		const box = new Outbox(ws, "turn1");
		assert.throws(() => box.add("big", Buffer.alloc(10 * MiB + 1)), OutboxError);
		for (let i = 0; i < 5; i++) box.add(`f${i}`, Buffer.alloc(10 * MiB));
		assert.throws(() => box.add("one-more-byte", Buffer.alloc(1)), /50 MiB in all/);
		const small = new Outbox(ws, "turn2");
		for (let i = 0; i < 10; i++) small.add(`s${i}.txt`, Buffer.from("x"));
		assert.throws(() => small.add("s10.txt", Buffer.from("x")), /at most 10 files/);
		assert.equal(small.packet().length, 10);
		assert.deepEqual(small.packet()[0], { name: "s0.txt", mime: "text/plain", data: "eA==" });
		assert.equal(readdirSync(join(ws, "outbox", "turn2")).length, 10);
	} finally {
		rmSync(ws, { recursive: true, force: true });
	}
});

test("names are sanitised as brokerd does; taken names get a number", () => {
	assert.equal(safeFileName("../../etc/passwd"), "_.._etc_passwd");
	assert.equal(safeFileName(".hidden"), "hidden");
	assert.equal(safeFileName("a\u0000b\nc"), "a_b_c");
	assert.equal(safeFileName(""), "file");
	assert.equal(Buffer.byteLength(safeFileName("é".repeat(200))), 254);
	assert.equal(fileMime("x.md"), "text/markdown");
	assert.equal(fileMime("x.exe"), "application/octet-stream");
	assert.equal(fileMime("x", "text/csv"), "text/csv");
	assert.equal(fileMime("x", "text/html"), "application/octet-stream");
	const ws = workspace();
	try {
		const box = new Outbox(ws, "t");
		assert.equal(box.add("a.txt", Buffer.from("1")), "a.txt");
		assert.equal(box.add("a.txt", Buffer.from("2")), "2-a.txt");
		// A file left by an earlier attempt at the same turn is not written through.
		const again = new Outbox(ws, "t");
		assert.equal(again.add("a.txt", Buffer.from("3")), "3-a.txt");
		assert.equal(readFileSync(join(ws, "outbox", "t", "a.txt"), "utf8"), "1");
	} finally {
		rmSync(ws, { recursive: true, force: true });
	}
});

test("a symbolic link in the outbox path is refused, never followed", () => {
	const ws = workspace();
	const elsewhere = workspace();
	try {
		symlinkSync(elsewhere, join(ws, "outbox"));
		assert.throws(() => new Outbox(ws, "t").add("a.txt", Buffer.from("x")), /not a directory/);
		assert.deepEqual(readdirSync(elsewhere), []);
		rmSync(join(ws, "outbox"));
		mkdirSync(join(ws, "outbox", "t"), { recursive: true });
		symlinkSync(join(elsewhere, "target"), join(ws, "outbox", "t", "a.txt"));
		assert.equal(new Outbox(ws, "t").add("a.txt", Buffer.from("x")), "2-a.txt");
		assert.deepEqual(readdirSync(elsewhere), []);
	} finally {
		rmSync(ws, { recursive: true, force: true });
		rmSync(elsewhere, { recursive: true, force: true });
	}
});

test("images: the bytes must match their type; four at most", () => {
	const png = Buffer.from("89504e470d0a1a0a0000", "hex").toString("base64");
	const jpeg = Buffer.from("ffd8ffe0", "hex").toString("base64");
	const { images, skipped } = imagesForModel([
		{ mime: "image/png", data: jpeg },
		{ mime: "image/jpeg", data: jpeg },
		...Array(5).fill({ mime: "image/png", data: png }),
	]);
	assert.equal(images.length, 4);
	assert.deepEqual(images[0], { type: "image", mimeType: "image/jpeg", data: jpeg });
	assert.deepEqual(skipped, { type: 1, count: 2 });
});

const turn = () => ({
	v: 1,
	turnId: "0123456789abcdef",
	speaker: { id: "1", name: "A", principalId: "p1" },
	text: "hi",
	images: [],
	attachments: [],
	timeZone: "Europe/Berlin",
	now: "2026-01-01T00:00:00+01:00",
	startFresh: false,
	model: "claude-x",
	maxOutputTokens: 4096,
	prompt: null,
	effort: "high",
	memory: null,
	tools: [{ name: "host_a", description: "d", parameters: { type: "object" }, route: "/tools/a" }],
	requireCapabilities: true,
	limits: { maxCalls: 7, turnTimeoutMs: 1000 },
});

test("the turn input: fields checked, bounds kept", () => {
	const t = parseTurn(turn());
	assert.equal(t.reader, "p1");
	assert.equal(t.maxCalls, 7);
	assert.equal(t.prompt, "");
	assert.equal(parseTurn({ ...turn(), speaker: { id: "9", name: "B", principalId: "" } }).reader, "9");
	const bad = (patch, field) => assert.throws(() => parseTurn({ ...turn(), ...patch }), (e) => e instanceof InputError && e.field === field);
	bad({ v: 2 }, "v");
	bad({ turnId: "../x" }, "turnId");
	bad({ text: "x".repeat(100_001) }, "text");
	bad({ timeZone: "Mars/Base" }, "timeZone");
	bad({ effort: "max" }, "effort");
	bad({ images: [{ mime: "image/svg+xml", data: "" }] }, "images[0].mime");
	bad({ images: [{ mime: "image/png", data: "!!" }] }, "images[0].data");
	bad({ tools: [{ name: "x", route: "/anthropic/v1/messages" }] }, "tools[0].route");
	bad({ memory: { text: "m", visibility: "public" } }, "memory.visibility");
	assert.equal(base64Bytes("aGk="), 2);
	assert.equal(base64Bytes("aGk"), -1);
});
