// SPDX-License-Identifier: Apache-2.0
// What the model reads each turn. The system prompt is rebuilt for every turn and never
// persisted (Pi keeps only the messages): the operator's persona (--content prompt.md), the
// profile's prompt, the skill index, the time in the configured zone, and the host's memory
// block for this speaker. The user message names the speaker and lists the turn's
// attachments (files the host saved in the workspace; the model is told where, nothing is
// read from them).

/** The current time in timeZone, as "2026-03-01 13:05 (Europe/Berlin)". */
export function localTime(timeZone, date = new Date()) {
	const f = new Intl.DateTimeFormat("en-CA", {
		timeZone,
		year: "numeric",
		month: "2-digit",
		day: "2-digit",
		hour: "2-digit",
		minute: "2-digit",
		hourCycle: "h23",
	});
	const p = Object.fromEntries(f.formatToParts(date).map((x) => [x.type, x.value]));
	return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute} (${timeZone})`;
}

/**
 * The turn's system prompt. persona: the image's prompt.md ("" when none); profile: the
 * profile's prompt; skillsBlock: skillsPromptBlock(); memory: {text, visibility} or null.
 */
export function systemPrompt({ persona, profile, skillsBlock, timeZone, now, memory }) {
	const parts = [];
	const who = [persona, profile].filter((s) => s && s.trim()).join("\n\n");
	parts.push(who || "You are a helpful assistant.");
	parts.push(
		"You take part in a group chat channel. Each message starts with the name of the person who wrote it; several people may talk to you in turn. Answer in plain text. To give someone a file, attach it with reply_file.",
	);
	if (skillsBlock) parts.push(skillsBlock);
	parts.push(`Current time: ${now && /^\d{4}-\d{2}-\d{2}T/.test(now) ? `${now} (${timeZone})` : localTime(timeZone)}`);
	if (memory && memory.text) {
		parts.push(`What the host keeps about the person you are answering now:\n<memory>\n${memory.text}\n</memory>`);
	}
	return parts.join("\n\n");
}

/** The user message: the speaker, the text, and notes about attachments and images. */
export function userText(input, skipped) {
	const lines = [`[${input.speaker.name || input.speaker.id}]: ${input.text}`];
	if (input.attachments.length > 0) {
		lines.push("", "Attachments (saved in the channel workspace; you cannot open them):");
		for (const a of input.attachments) lines.push(`- ${a.name} (${a.mime}, ${a.bytes} bytes): ${a.path}`);
	}
	if (skipped.count > 0) lines.push("", `(${skipped.count} more image(s) came with this message: only four are shown to you.)`);
	if (skipped.type > 0) lines.push("", `(${skipped.type} image(s) came in a form that cannot be shown.)`);
	return lines.join("\n");
}
