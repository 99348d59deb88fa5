// SPDX-License-Identifier: Apache-2.0
// One Pi agent session per channel (DESIGN.md 8.5; seed, "Explicit Pi/subscription mode",
// "Worker content and files", "Pi isolation and continuity"), kept in the workspace under
// sessions/ and continued across turns and container restarts (continueRecent), with
// /workspace as Pi's working directory.
//
// Only what the operator declared goes in: the profile's model, the persona and profile
// prompt, the skill index, the broker's host and MCP tools. Pi's automatic extensions,
// context files (AGENTS.md, ...), prompt templates, skill discovery, themes, settings files
// and built-in tools stay off: the resource loader below returns only the worker's own
// extension and prompt (pi-notes finding 6: the stock loader reads a guest-writable
// /workspace/.pi/ even with every "no" flag, and may spawn a package manager from it), and
// the settings live in memory.
//
// Every model call of the process (the agent's and Pi's own summaries) goes through one
// provider of the worker's ("roundtable-sandbox-anthropic", pi-ai's Anthropic Messages
// stream behind a check): it refuses a call outside a turn, past the turn's call budget, a
// summary of a preparation the compaction hook did not redact, and any request that would
// replay raw material the raw branch hides from the turn's reader (privacy.mjs). It also
// fixes what the SDK would otherwise choose: no retries (each would be another broker call),
// the profile's output limit, a timeout within the turn. If Pi's provider registry were
// ever reset, the model's api would name no provider and every call would fail: closed.

import { AsyncLocalStorage } from "node:async_hooks";
import { lstatSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { createAssistantMessageEventStream, getApiProvider, getModel, registerApiProvider } from "@mariozechner/pi-ai";
import { streamAnthropic, streamSimpleAnthropic } from "@mariozechner/pi-ai/anthropic";
import {
	AuthStorage,
	DefaultResourceLoader,
	ModelRegistry,
	SessionManager,
	SettingsManager,
	createAgentSession,
} from "@mariozechner/pi-coding-agent";
import { BROKER_ORIGIN } from "./broker.mjs";
import { Compaction, latestCompaction } from "./compaction.mjs";
import { EMPTY_DIR, KEEP_RECENT_TOKENS, MODEL_DUMMY_KEY, RESERVE_TOKENS, UNKNOWN_MODEL_WINDOW } from "./limits.mjs";
import { errorText, log } from "./log.mjs";
import { READER_ENTRY, hiddenFromReader, projectForReader, replayRefusal } from "./privacy.mjs";
import { compactionTrigger } from "./tiers.mjs";
import { buildTools } from "./tools.mjs";

/** The api name of the worker's guarded provider. */
export const GUARDED_API = "roundtable-sandbox-anthropic";
/** Session files live here, inside the workspace. */
export const SESSIONS = "sessions";

/** Where a turn's model call comes from: set by the agent's stream function. */
const callKind = new AsyncLocalStorage();

/** The check before every model call; set by the channel session. Returns a refusal or undefined. */
let beforeModelCall = () => "no channel session is open";

function refusedStream(model, reason) {
	const stream = createAssistantMessageEventStream();
	const message = {
		role: "assistant",
		content: [],
		api: model.api,
		provider: model.provider,
		model: model.id,
		usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
		stopReason: "error",
		errorMessage: `refused: ${reason}`,
		timestamp: Date.now(),
	};
	queueMicrotask(() => {
		stream.push({ type: "error", reason: "error", error: message });
		stream.end();
	});
	return stream;
}

function guarded(inner) {
	return (model, context, options) => {
		let verdict;
		try {
			verdict = beforeModelCall(context, callKind.getStore() ?? "summary");
		} catch (e) {
			verdict = { refusal: `the check failed (${errorText(e)})` };
		}
		if (verdict.refusal) return refusedStream(model, verdict.refusal);
		return inner(model, context, { ...options, ...verdict.options });
	};
}

/** Register (again) the worker's provider; idempotent. */
export function registerGuardedProvider() {
	registerApiProvider({ api: GUARDED_API, stream: guarded(streamAnthropic), streamSimple: guarded(streamSimpleAnthropic) }, "roundtable-sandbox");
}

/** The profile's model as Pi's Model, talking to the broker. Unknown ids get a hand-made
 * model with the smaller Claude window. */
export function brokerModel(id, maxOutputTokens) {
	const known = getModel("anthropic", id);
	const base = known ?? {
		id,
		name: id,
		provider: "anthropic",
		reasoning: true,
		input: ["text", "image"],
		cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
		contextWindow: UNKNOWN_MODEL_WINDOW,
		maxTokens: maxOutputTokens,
	};
	// baseUrl: the SDK appends /v1/messages: POST /anthropic/v1/messages on the socket.
	return { ...base, api: GUARDED_API, baseUrl: `${BROKER_ORIGIN}/anthropic`, maxTokens: maxOutputTokens };
}

/** lstat path: "dir" (a real directory), "missing", or "other" (a symbolic link included). */
function kind(path) {
	try {
		const st = lstatSync(path);
		return st.isDirectory() && !st.isSymbolicLink() ? "dir" : "other";
	} catch (e) {
		if (e.code === "ENOENT") return "missing";
		throw e;
	}
}

export class SessionDirError extends Error {}

/** Make sure workspace/sessions is a real directory (never through a symbolic link). */
export function sessionsDir(workspace) {
	const dir = join(workspace, SESSIONS);
	const k = kind(dir);
	if (k === "missing") mkdirSync(dir, { mode: 0o700 });
	else if (k !== "dir") throw new SessionDirError(`${dir} is not a directory (start the channel fresh)`);
	if (kind(dir) !== "dir") throw new SessionDirError(`${dir} is not a directory (start the channel fresh)`);
	return dir;
}

/** Open the channel's session manager: the newest session, or a new one when fresh is set or
 * the newest file is not a regular file. */
export function openSessionManager(workspace, fresh) {
	const dir = sessionsDir(workspace);
	if (fresh) return SessionManager.create(workspace, dir);
	const sm = SessionManager.continueRecent(workspace, dir);
	const file = sm.getSessionFile();
	if (file) {
		try {
			const st = lstatSync(file);
			if (!st.isFile()) {
				log("session file is not a regular file: starting a new session", {});
				return SessionManager.create(workspace, dir);
			}
		} catch {
			// Not written yet: a new session.
		}
	}
	return sm;
}

/** What makes a session's construction: a change of any of these rebuilds it. */
function sessionKey(input) {
	return JSON.stringify([input.model, input.maxOutputTokens, input.tools]);
}

function estimateChars(s) {
	return Math.ceil(s.length / 4);
}

/**
 * A channel's session. opts: {workspace, persona, skills, skillsDir, skillsBlock}. The running
 * turn's state (turn.mjs) is set with begin()/end(); hooks and tools read it.
 */
export class ChannelSession {
	constructor(opts) {
		this.opts = opts;
		this.session = undefined;
		this.sm = undefined;
		this.key = undefined;
		this.turn = undefined;
		this.toolsTokens = 0;
		/** The compaction under way: {reason, redacted}; undefined between compactions. */
		this.phase = { reason: undefined, redacted: false, active: false };
		this.events = new EventTarget();
		this.compaction = new Compaction({
			turn: () => this.turn,
			phase: () => this.phase,
			systemTokens: () => estimateChars(this.turn?.systemPrompt ?? "") + this.toolsTokens,
		});
		registerGuardedProvider();
		beforeModelCall = (context, source) => this.checkModelCall(context, source);
	}

	/** The check before every model call (see the top of this file). */
	checkModelCall(context, source) {
		const turn = this.turn;
		if (!turn) return { refusal: "no turn is running" };
		if (!turn.budget.take()) return { refusal: "this turn has used up its calls" };
		const timeoutMs = Math.max(1, turn.timeLeftMs());
		if (source === "summary") {
			// Pi's own summary: only of a preparation the hook redacted in this compaction.
			if (!this.phase.active || !this.phase.redacted) return { refusal: "a summary of an unredacted history" };
			return { options: { maxRetries: 0, timeoutMs } };
		}
		const hidden = hiddenFromReader(this.sm.getBranch(), turn.reader);
		const refusal = replayRefusal(context.messages ?? [], hidden);
		if (refusal) {
			turn.refused = refusal;
			return { refusal };
		}
		return { options: { maxRetries: 0, timeoutMs, maxTokens: turn.maxOutputTokens } };
	}

	/** The session for input, built (or rebuilt: another model, limit or tool list) as needed. */
	async ensure(input) {
		const key = sessionKey(input);
		if (this.session && this.key === key && !input.startFresh) return this.session;
		const fresh = input.startFresh === true;
		if (this.session) {
			this.session.dispose();
			this.session = undefined;
		}
		await this.build(input, fresh);
		this.key = key;
		return this.session;
	}

	async build(input, fresh) {
		const model = brokerModel(input.model, input.maxOutputTokens);
		const authStorage = AuthStorage.inMemory();
		authStorage.setRuntimeApiKey("anthropic", MODEL_DUMMY_KEY);
		const modelRegistry = ModelRegistry.inMemory(authStorage);
		const settingsManager = SettingsManager.inMemory({
			compaction: { enabled: true, reserveTokens: RESERVE_TOKENS, keepRecentTokens: KEEP_RECENT_TOKENS },
			retry: { enabled: false, provider: { maxRetries: 0 } },
			images: { autoResize: false, blockImages: false },
			enableSkillCommands: false,
			enableInstallTelemetry: false,
		});
		const sm = openSessionManager(this.opts.workspace, fresh);
		// The tiers: Pi compacts past window - reserveTokens, so each tier moves the reserve.
		const base = settingsManager.getCompactionSettings.bind(settingsManager);
		settingsManager.getCompactionSettings = () => {
			const resolved = base();
			const trigger = compactionTrigger(model.contextWindow, resolved.reserveTokens, latestCompaction(sm.getBranch()));
			return trigger === undefined ? resolved : { ...resolved, reserveTokens: model.contextWindow - trigger };
		};
		this.nextCompactionAt = () => model.contextWindow - settingsManager.getCompactionSettings().reserveTokens;

		const extension = (pi) => this.hooks(pi);
		const helper = new DefaultResourceLoader({
			cwd: EMPTY_DIR,
			agentDir: EMPTY_DIR,
			settingsManager,
			noExtensions: true,
			noSkills: true,
			noPromptTemplates: true,
			noThemes: true,
			noContextFiles: true,
			appendSystemPrompt: [],
			extensionFactories: [extension],
		});
		await helper.reload();
		const ext = helper.getExtensions();
		if (ext.errors.length) throw new Error(`the worker's extension did not load: ${ext.errors.map((e) => e.error).join("; ")}`);
		const basePrompt = this.opts.persona || "You are a helpful assistant.";
		const resourceLoader = {
			getExtensions: () => ext,
			getSkills: () => ({ skills: [], diagnostics: [] }),
			getPrompts: () => ({ prompts: [], diagnostics: [] }),
			getThemes: () => ({ themes: [], diagnostics: [] }),
			getAgentsFiles: () => ({ agentsFiles: [] }),
			getSystemPrompt: () => basePrompt,
			getAppendSystemPrompt: () => [],
			extendResources: () => {},
			reload: async () => {},
		};
		const tools = buildTools(input.tools, {
			turn: () => this.turn,
			messages: () => this.session?.messages ?? [],
			skills: this.opts.skills,
			skillsDir: this.opts.skillsDir,
		});
		this.toolsTokens = estimateChars(JSON.stringify(tools.map((t) => [t.name, t.description, t.parameters])));
		const { session } = await createAgentSession({
			cwd: this.opts.workspace,
			agentDir: EMPTY_DIR,
			model,
			thinkingLevel: "off",
			authStorage,
			modelRegistry,
			resourceLoader,
			settingsManager,
			sessionManager: sm,
			customTools: tools,
			tools: tools.map((t) => t.name),
		});
		// Turn calls are told apart from Pi's own summaries by where they come from.
		const agentStream = session.agent.streamFn;
		session.agent.streamFn = (m, c, o) => callKind.run("turn", () => agentStream(m, c, o));
		session.subscribe((e) => this.onEvent(e));
		this.session = session;
		this.sm = sm;
		this.model = model;
		log("session open", { model: model.id, contextWindow: model.contextWindow, tools: tools.length, fresh, restored: session.messages.length });
	}

	/** The worker's only extension: request projection, the per-turn system prompt, tagged
	 * error results, and the compaction hook. Each handler is total (Pi swallows handler
	 * errors and would carry on with what it had: pi-notes finding 4), and each failure
	 * ends on the safe side. */
	hooks(pi) {
		pi.on("context", (event) => {
			try {
				const turn = this.turn;
				const hidden = hiddenFromReader(this.sm.getBranch(), turn?.reader).ids;
				return { messages: projectForReader(event.messages, turn?.reader, hidden) };
			} catch (e) {
				// Unprojected messages would go out: the model-call check refuses them.
				log("projection failed", { error: errorText(e) });
				return undefined;
			}
		});
		pi.on("before_agent_start", () => {
			try {
				return this.turn ? { systemPrompt: this.turn.systemPrompt } : undefined;
			} catch {
				return undefined;
			}
		});
		pi.on("tool_result", (event) => (event.details && event.details.isError === true ? { isError: true } : undefined));
		pi.on("session_before_compact", (event) => this.compaction.beforeCompact(event));
	}

	onEvent(e) {
		try {
			if (e.type === "compaction_start") this.phase = { reason: e.reason, redacted: false, active: true };
			else if (e.type === "compaction_end") {
				this.phase = { reason: undefined, redacted: false, active: false };
				this.compaction.ended(e, this.session, this.nextCompactionAt());
				if (e.willRetry && this.turn) this.turn.continues++;
			} else if (e.type === "agent_start" && this.turn && this.turn.continues > 0) this.turn.continues--;
			else if (e.type === "message_end" && e.message?.role === "assistant" && e.message.stopReason === "error")
				log("model call failed", { turnId: this.turn?.turnId, error: errorText(e.message.errorMessage) });
			else if (e.type === "tool_execution_end" && e.isError) log("tool call ended in an error", { turnId: this.turn?.turnId, tool: e.toolName });
		} catch (err) {
			log("event handling failed", { error: errorText(err) });
		}
		this.events.dispatchEvent(new Event("change"));
	}

	/** Resolves at the session's next event (or when signal aborts). */
	nextEvent(signal) {
		return new Promise((resolve) => {
			const done = () => {
				this.events.removeEventListener("change", done);
				signal.removeEventListener("abort", done);
				resolve();
			};
			this.events.addEventListener("change", done);
			signal.addEventListener("abort", done);
		});
	}

	/** Wait until the turn's work is over: the agent idle, its queued event processing done
	 * (auto-compaction runs there, after prompt() has resolved: pi-notes finding 5), no
	 * compaction running, no continuation pending, and the compaction reports sent. */
	async settle(turn) {
		const s = this.session;
		for (;;) {
			await s.agent.waitForIdle();
			const queued = s._agentEventQueue;
			await queued;
			if (turn.signal.aborted) break;
			if (s.isCompacting || s.isStreaming || turn.continues > 0 || queued !== s._agentEventQueue) {
				if (s.isCompacting || turn.continues > 0) await this.nextEvent(turn.signal);
				continue;
			}
			break;
		}
		await Promise.allSettled([...turn.compactions.pending]);
	}

	/** Abort whatever the session is doing (a turn's deadline). */
	async abort() {
		if (!this.session) return;
		this.session.abortCompaction();
		await this.session.abort();
	}

	/** Append the turn's reader record (privacy.mjs) to the session. */
	recordReader(record) {
		this.sm.appendCustomEntry(READER_ENTRY, record);
	}
}
