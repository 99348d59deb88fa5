// SPDX-License-Identifier: Apache-2.0
// lib/skills.mjs: the index, read_skill's confinement and bounds, the gates.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { SkillError, gateOwner, loadSkillIndex, readSkillFile, skillRead, skillsPromptBlock } from "../lib/skills.mjs";

// Pi's parseFrontmatter reads YAML; these tests need only "key: value" and "key: [a, b]".
function frontmatter(text) {
	const m = /^---\n([\s\S]*?)\n---/.exec(text);
	const out = {};
	for (const line of m ? m[1].split("\n") : []) {
		const [k, ...rest] = line.split(":");
		const v = rest.join(":").trim();
		out[k.trim()] = v.startsWith("[") ? v.slice(1, -1).split(",").map((s) => s.trim()) : v;
	}
	return { frontmatter: out, body: "" };
}

function tree() {
	const root = mkdtempSync(join(tmpdir(), "rts-pi-skills-"));
	const skills = join(root, "skills");
	mkdirSync(join(skills, "dice", "ref"), { recursive: true });
	mkdirSync(join(skills, "other"), { recursive: true });
	writeFileSync(join(skills, "dice", "SKILL.md"), "---\nname: dice\ndescription: Dice <rules>.\ntools: [host_roll]\n---\nbody\n");
	writeFileSync(join(skills, "dice", "ref", "t.md"), "table");
	writeFileSync(join(skills, "dice", "big.md"), "b".repeat(256 * 1024 + 1));
	writeFileSync(join(skills, "dice", "long.md"), "l".repeat(50_000));
	writeFileSync(join(skills, "other", "SKILL.md"), "---\nname: other\ndescription: Other.\n---\n");
	writeFileSync(join(root, "secret.txt"), "outside");
	symlinkSync(join(root, "secret.txt"), join(skills, "dice", "link.md"));
	return { root, skills };
}

test("the index, and its prompt block", () => {
	const { root, skills } = tree();
	try {
		const index = loadSkillIndex(skills, frontmatter);
		assert.deepEqual(index, [
			{ name: "dice", description: "Dice <rules>.", tools: ["host_roll"] },
			{ name: "other", description: "Other.", tools: [] },
		]);
		assert.match(skillsPromptBlock(index), /<description>Dice &lt;rules&gt;.<\/description>/);
		assert.equal(skillsPromptBlock([]), "");
		assert.deepEqual(loadSkillIndex(join(root, "none"), frontmatter), []);
		writeFileSync(join(skills, "other", "SKILL.md"), "---\nname: wrong\ndescription: x\n---\n");
		assert.throws(() => loadSkillIndex(skills, frontmatter), /must name it/);
	} finally {
		rmSync(root, { recursive: true, force: true });
	}
});

test("read_skill stays inside the skill and within its bounds", () => {
	const { root, skills } = tree();
	try {
		const index = loadSkillIndex(skills, frontmatter);
		assert.deepEqual(readSkillFile(skills, index, "dice"), { text: "---\nname: dice\ndescription: Dice <rules>.\ntools: [host_roll]\n---\nbody\n", file: "SKILL.md" });
		assert.equal(readSkillFile(skills, index, "dice", "ref/t.md").text, "table");
		const refused = (skill, path, re) => assert.throws(() => readSkillFile(skills, index, skill, path), (e) => e instanceof SkillError && re.test(e.message));
		refused("dice", "../other/SKILL.md", /stay inside/);
		refused("dice", "ref/../../other/SKILL.md", /stay inside/);
		refused("dice", join(root, "secret.txt"), /relative/);
		refused("dice", "link.md", /stay inside/);
		refused("dice", "big.md", /larger than 256 KiB/);
		refused("dice", "ref", /not a regular file/);
		refused("nope", undefined, /no skill named/);
		refused("..", undefined, /no skill named/);
		const long = readSkillFile(skills, index, "dice", "long.md").text;
		assert.ok(long.startsWith("l".repeat(40_000)) && !long.includes("l".repeat(40_001)) && long.endsWith("[cut at 40000 characters]"));
	} finally {
		rmSync(root, { recursive: true, force: true });
	}
});

test("a gate opens once the skill's SKILL.md was read without error", () => {
	const index = [{ name: "dice", description: "d", tools: ["host_roll"] }];
	assert.equal(gateOwner(index, "host_roll"), "dice");
	assert.equal(gateOwner(index, "host_other"), undefined);
	const read = (file, isError = false) => ({ role: "toolResult", toolName: "read_skill", isError, details: { skill: "dice", file } });
	assert.equal(skillRead([read("ref/t.md")], "dice"), false);
	assert.equal(skillRead([read("SKILL.md", true)], "dice"), false);
	assert.equal(skillRead([read("SKILL.md")], "dice"), true);
});
