// SPDX-License-Identifier: Apache-2.0
// The turn's images for the model (seed, "Worker content and files": images are prepared
// from the bytes the host delivered, at most four, never by reopening a path in the guest
// workspace). The host sends at most eight, each with its type; an image whose bytes do not
// start the way its type says is left out, and so is every one past the fourth.

import { IMAGES_TO_MODEL_MAX } from "./limits.mjs";

const SIGNATURES = {
	"image/png": (b) => b.length >= 8 && b.readUInt32BE(0) === 0x89504e47 && b.readUInt32BE(4) === 0x0d0a1a0a,
	"image/jpeg": (b) => b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff,
	"image/gif": (b) => b.length >= 6 && (b.toString("latin1", 0, 6) === "GIF87a" || b.toString("latin1", 0, 6) === "GIF89a"),
	"image/webp": (b) => b.length >= 12 && b.toString("latin1", 0, 4) === "RIFF" && b.toString("latin1", 8, 12) === "WEBP",
};

/**
 * images: the input's [{mime, data (base64)}]. Returns {images: Pi's ImageContent[] (at most
 * four), skipped: how many were left out and why ("type" or "count")}.
 */
export function imagesForModel(images) {
	const out = [];
	const skipped = { type: 0, count: 0 };
	for (const im of images) {
		const bytes = Buffer.from(im.data, "base64");
		const ok = SIGNATURES[im.mime];
		if (!ok || !ok(bytes)) {
			skipped.type++;
			continue;
		}
		if (out.length >= IMAGES_TO_MODEL_MAX) {
			skipped.count++;
			continue;
		}
		out.push({ type: "image", mimeType: im.mime, data: bytes.toString("base64") });
	}
	return { images: out, skipped };
}
