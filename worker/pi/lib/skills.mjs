// SPDX-License-Identifier: Apache-2.0
// Operator skills baked into the image (seed, "Worker content and files"): an index in the
// system prompt, a bounded read_skill confined to the skills tree (256 KiB per file, 40,000
// characters returned), and tool gates: a tool a skill claims (its frontmatter "tools") is
// refused until that skill's SKILL.md has been read in the conversation the model still
// sees. Pi's own skill discovery stays off; this reads only CONTENT_DIR/skills.
//
// Layout: skills/<name>/SKILL.md with YAML frontmatter {name: <name>, description, tools?:
// [tool names as the model sees them]}, plus any files the skill refers to, read with
// read_skill {skill, path}.

import { closeSync, fstatSync, openSync, readdirSync, readSync, realpathSync, constants } from "node:fs";
import { isAbsolute, join, normalize, sep } from "node:path";
import { SKILL_FILE_BYTES_MAX, SKILL_READ_CHARS_MAX, SKILLS_MAX } from "./limits.mjs";

export class SkillError extends Error {}

const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;
const DESCRIPTION_MAX = 1024;
export const SKILL_FILE = "SKILL.md";

/** Read a regular file of at most SKILL_FILE_BYTES_MAX bytes (no symbolic link as its last
 * component). Throws a SkillError for anything else. */
function readBoundedFile(path) {
	let fd;
	try {
		fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
	} catch (e) {
		throw new SkillError(e.code === "ENOENT" ? "there is no such file" : "the file cannot be opened");
	}
	try {
		const st = fstatSync(fd);
		if (!st.isFile()) throw new SkillError("that is not a regular file");
		if (st.size > SKILL_FILE_BYTES_MAX) throw new SkillError("the file is larger than 256 KiB");
		const buf = Buffer.alloc(SKILL_FILE_BYTES_MAX + 1);
		let n = 0;
		for (;;) {
			const r = readSync(fd, buf, n, buf.length - n, null);
			if (r === 0) break;
			n += r;
			if (n > SKILL_FILE_BYTES_MAX) throw new SkillError("the file is larger than 256 KiB");
		}
		return buf.subarray(0, n).toString("utf8");
	} finally {
		closeSync(fd);
	}
}

/**
 * The skill index of skillsDir: [{name, description, tools}] sorted by name; [] when the
 * directory does not exist. parseFrontmatter: Pi's (text) => {frontmatter, body}. Throws a
 * SkillError naming the skill for a SKILL.md without a matching name or a description
 * (seed: such a skill fails start-up).
 */
export function loadSkillIndex(skillsDir, parseFrontmatter) {
	let dirents;
	try {
		dirents = readdirSync(skillsDir, { withFileTypes: true });
	} catch (e) {
		if (e.code === "ENOENT") return [];
		throw e;
	}
	const skills = [];
	for (const d of dirents) {
		if (!d.isDirectory()) continue;
		if (!NAME.test(d.name)) throw new SkillError(`skill directory ${JSON.stringify(d.name)}: names are [a-z0-9-], at most 64`);
		let text;
		try {
			text = readBoundedFile(join(skillsDir, d.name, SKILL_FILE));
		} catch (e) {
			throw new SkillError(`skill ${d.name}: ${SKILL_FILE}: ${e.message}`);
		}
		const { frontmatter } = parseFrontmatter(text);
		const meta = frontmatter && typeof frontmatter === "object" ? frontmatter : {};
		if (meta.name !== d.name) throw new SkillError(`skill ${d.name}: its frontmatter must name it (name: ${d.name})`);
		if (typeof meta.description !== "string" || !meta.description.trim() || meta.description.length > DESCRIPTION_MAX)
			throw new SkillError(`skill ${d.name}: its frontmatter needs a description (at most ${DESCRIPTION_MAX} characters)`);
		const tools = Array.isArray(meta.tools) ? meta.tools.filter((t) => typeof t === "string" && t.length > 0 && t.length <= 128) : [];
		skills.push({ name: d.name, description: meta.description.trim(), tools });
		if (skills.length > SKILLS_MAX) throw new SkillError(`more than ${SKILLS_MAX} skills`);
	}
	return skills.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function escapeXml(s) {
	return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** The system prompt's skill index; "" without skills. */
export function skillsPromptBlock(skills) {
	if (skills.length === 0) return "";
	const entries = skills.map((s) => `  <skill>\n    <name>${escapeXml(s.name)}</name>\n    <description>${escapeXml(s.description)}</description>\n  </skill>`);
	return [
		"The skills below hold this channel's own procedures. When a request matches a skill's description, read the skill with read_skill before answering or calling another tool, unless you read it earlier in this conversation; read the files it points to the same way. Some tools stay locked until their skill has been read.",
		"<available_skills>",
		...entries,
		"</available_skills>",
	].join("\n");
}

/**
 * read_skill: the text of a file of a known skill (default its SKILL.md), confined to the
 * skill's own directory under skillsDir, at most 256 KiB read and 40,000 characters
 * returned. Returns {text, file} (file: the path inside the skill, normalised). Throws a
 * SkillError whose message the model may see.
 */
export function readSkillFile(skillsDir, skills, skill, path) {
	if (!skills.some((s) => s.name === skill)) throw new SkillError(`there is no skill named ${JSON.stringify(String(skill).slice(0, 64))}`);
	const rel = path === undefined || path === null || path === "" ? SKILL_FILE : String(path);
	if (rel.includes("\0") || isAbsolute(rel)) throw new SkillError("the path must be relative to the skill's directory");
	const norm = normalize(rel);
	if (norm === ".." || norm.startsWith(`..${sep}`) || norm === ".") throw new SkillError("the path must stay inside the skill's directory");
	let base;
	let root;
	let real;
	try {
		base = realpathSync(skillsDir);
		root = realpathSync(join(base, skill));
	} catch {
		throw new SkillError("the skill cannot be read");
	}
	if (!root.startsWith(base + sep)) throw new SkillError("the skill's directory is outside the skills tree");
	try {
		real = realpathSync(join(root, norm));
	} catch {
		throw new SkillError(`${norm} is not a file of ${skill}`);
	}
	if (!real.startsWith(root + sep)) throw new SkillError("the path must stay inside the skill's directory");
	const text = readBoundedFile(real);
	const cut = text.length > SKILL_READ_CHARS_MAX ? `${text.slice(0, SKILL_READ_CHARS_MAX)}\n\n[cut at ${SKILL_READ_CHARS_MAX} characters]` : text;
	return { text: cut, file: norm };
}

/** The skill that gates tool name, or undefined. */
export function gateOwner(skills, name) {
	for (const s of skills) if (s.tools.includes(name)) return s.name;
	return undefined;
}

/** Whether messages (what the model sees now) hold a successful read of skill's SKILL.md. */
export function skillRead(messages, skill) {
	for (const m of messages) {
		if (m?.role !== "toolResult" || m.toolName !== "read_skill" || m.isError) continue;
		const d = m.details;
		if (d && d.skill === skill && d.file === SKILL_FILE) return true;
	}
	return false;
}
