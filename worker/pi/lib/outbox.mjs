// SPDX-License-Identifier: Apache-2.0
// Reply files (seed, "Worker content and files": ten files, 10 MiB each, 50 MiB in all,
// base64 on the broker wire; no host path is ever attached or reopened). The model makes a
// file with the reply_file tool; the outbox keeps the bytes in memory for the reply packet
// and writes a copy to /workspace/outbox/<turn id>/ for the channel's record. The copy is
// created exclusively and never through a symbolic link, and never read back.

import { closeSync, constants, lstatSync, mkdirSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { FILE_NAME_BYTES_MAX, REPLY_FILE_BYTES_MAX, REPLY_FILES_MAX, REPLY_FILES_TOTAL_MAX } from "./limits.mjs";

/** The types brokerd passes on as they are; anything else travels as octet-stream. */
const MIMES = new Map([
	["png", "image/png"],
	["jpg", "image/jpeg"],
	["jpeg", "image/jpeg"],
	["webp", "image/webp"],
	["gif", "image/gif"],
	["txt", "text/plain"],
	["md", "text/markdown"],
	["csv", "text/csv"],
	["json", "application/json"],
	["pdf", "application/pdf"],
	["mp3", "audio/mpeg"],
	["ogg", "audio/ogg"],
	["wav", "audio/wav"],
	["mp4", "video/mp4"],
]);
const KNOWN = new Set(MIMES.values());

export class OutboxError extends Error {}

/** A file name as brokerd would sanitise it: no leading dots or spaces, no '/', '\' or
 * control characters, at most 255 bytes cut on a character boundary, never empty. */
export function safeFileName(name) {
	let s = String(name).replace(/^[. ]+/, "");
	s = s.replace(/[/\\\u0000-\u001f\u007f]/g, "_");
	while (Buffer.byteLength(s, "utf8") > FILE_NAME_BYTES_MAX) s = [...s].slice(0, -1).join("");
	return s || "file";
}

/** The type of a reply file: the given one when brokerd knows it, else from the name. */
export function fileMime(name, mime) {
	if (typeof mime === "string" && KNOWN.has(mime)) return mime;
	const ext = /\.([A-Za-z0-9]{1,8})$/.exec(name)?.[1]?.toLowerCase();
	return (ext && MIMES.get(ext)) || "application/octet-stream";
}

/** mkdir -p of dir under root, refusing any component that exists and is not a real directory. */
function ensureDirNoFollow(root, parts) {
	let path = root;
	for (const part of parts) {
		path = join(path, part);
		let st;
		try {
			st = lstatSync(path);
		} catch (e) {
			if (e.code !== "ENOENT") throw e;
			mkdirSync(path, { mode: 0o700 });
			st = lstatSync(path);
		}
		if (!st.isDirectory() || st.isSymbolicLink()) throw new OutboxError(`${path} is not a directory`);
	}
	return path;
}

export class Outbox {
	/** workspace: the channel workspace; turnId: [A-Za-z0-9_-]+ (checked by the input). */
	constructor(workspace, turnId) {
		this.workspace = workspace;
		this.turnId = turnId;
		this.files = [];
		this.total = 0;
	}

	/** Add a file; throws an OutboxError whose message the model may see. Returns the name used. */
	add(name, bytes, mime) {
		if (this.files.length >= REPLY_FILES_MAX) throw new OutboxError(`a reply holds at most ${REPLY_FILES_MAX} files`);
		if (bytes.length > REPLY_FILE_BYTES_MAX) throw new OutboxError("a reply file holds at most 10 MiB");
		if (this.total + bytes.length > REPLY_FILES_TOTAL_MAX) throw new OutboxError("a reply's files hold at most 50 MiB in all");
		const base = safeFileName(name);
		const dir = ensureDirNoFollow(this.workspace, ["outbox", this.turnId]);
		// A name taken (in this reply, or on disk by an earlier attempt at this turn) gets a
		// number in front; O_EXCL|O_NOFOLLOW never writes through anything already there.
		let safe = base;
		let fd;
		for (let k = 2; fd === undefined; k++) {
			if (!this.files.some((f) => f.name === safe)) {
				try {
					fd = openSync(join(dir, safe), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
					break;
				} catch (e) {
					if (e.code !== "EEXIST" || k > REPLY_FILES_MAX + 100) throw e;
				}
			}
			safe = safeFileName(`${k}-${base}`);
		}
		try {
			let off = 0;
			while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
		} finally {
			closeSync(fd);
		}
		this.files.push({ name: safe, mime: fileMime(safe, mime), bytes });
		this.total += bytes.length;
		return safe;
	}

	/** The reply packet's files: [{name, mime, data (base64)}], from the bytes kept in memory. */
	packet() {
		return this.files.map((f) => ({ name: f.name, mime: f.mime, data: f.bytes.toString("base64") }));
	}
}
