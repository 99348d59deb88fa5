// SPDX-License-Identifier: Apache-2.0
// roundtable-sandbox precheck harness: the entrypoint of the precheck image
// (seed: "Precheck scripts"; DESIGN.md 8.3; the contract is HACKING.md "Precheck runtime").
//
//   node harness.mjs [--broker SOCKET]     (default /run/broker/broker.sock)
//
// stdin: one JSON object, the run (bounded, strict). The harness loads the run's script as an
// ES module, calls its default export with { mcp, firedAt, timeZone, today, schedule } and
// writes exactly one JSON line to stdout, then exits 0:
//   {"v":1,"wake":false} / {"v":1,"wake":false,"note":N} / {"v":1,"wake":true,"context":C}
//   {"v":1,"wake":true,"error":E}      a throw, a wrong answer, a failed load, an early exit
// Unusable input: {"v":1,"error":"bad_input","field":F} and exit 1. Anything else on stdout,
// or another exit status, is a failed run for the host.
//
// What this file is and is not. It is trusted in that the host relies on it to state the
// script's answer faithfully and within bounds; it is not a boundary. The script runs in
// this same process with all of node at hand: it can connect to the broker socket itself,
// write to fd 1 or end the process. The boundaries are the container (no network, read-only
// root, no capabilities, limits) and the broker (grants, approvals, budget, one call at a
// time). So this file adds no capability (it only uses the socket the container already
// has) and everything it checks, the host checks again: runnerd reads the result line
// strictly with the same bounds, and brokerd enforces every call rule on its own. The local
// checks here are there to give an honest script clear errors, and to keep an ordinary
// mistake (console.log, a stray rejection, a forgotten await) from spoiling the answer.
//
// Node's standard library only; works on Debian's nodejs 18 and later.

import fs from 'node:fs';
import http from 'node:http';

// Bounds (bytes of UTF-8 unless said otherwise). The host's copies are in common/limits.h
// (RTS_PRECHECK_*, RTS_BROKER_*); change both together.
const INPUT_MAX = 512 * 1024; // the whole stdin object, as RTS_WORKER_INPUT_MAX
const INPUT_TIMEOUT_MS = 30000; // runnerd writes the input and closes stdin at once
const SCRIPT_MAX = 64 * 1024; // the script's source
const NOTE_MAX = 1024; // {wake:false, note}
const CONTEXT_MAX = 16 * 1024; // {wake:true, context}
const ERROR_MAX = 2048; // {wake:true, error}: longer texts are cut, never refused
const TOOLS_MAX = 256; // approved (server, tool) pairs: 8 servers of 32 tools
const TOOL_NAME_MAX = 128; // the MCP specification's tool-name length
const MAX_CALLS_MAX = 1000;
const TIME_ZONE_MAX = 64; // RTS_TIME_ZONE_MAX
const FIRED_AT_MAX = 64;
const BODY_MAX = 256 * 1024; // one request body, RTS_BROKER_BODY_MAX
const ANSWER_MAX = 6 * 1024 * 1024 + 4096; // one broker answer, RTS_BROKER_ANSWER_MAX
const TOOL_ERROR_TEXT_MAX = 1000; // a tool error's text quoted in the exception
const DEFAULT_BROKER = '/run/broker/broker.sock';
const DUMMY_KEY = 'roundtable-sandbox-dummy-key'; // RTS_DUMMY_KEY: the broker swaps in the real one

// What the harness itself uses after the script is loaded, taken now: a script that
// replaces a global or a prototype method must not change how its answer is judged or
// written. (It can still write fd 1 itself; see above.) For the same reason the code that
// runs after the script loops by index rather than with iterators.
const apply = Reflect.apply;
const uncurry = (fn) => (self, ...args) => apply(fn, self, args);
const stringify = JSON.stringify;
const parseJson = JSON.parse;
const ownKeys = Reflect.ownKeys;
const getOwnPropertyDescriptor = Reflect.getOwnPropertyDescriptor;
const isArray = Array.isArray;
const freeze = Object.freeze;
const byteLength = Buffer.byteLength;
const bufferFrom = Buffer.from;
const bufferConcat = Buffer.concat;
const regexpTest = uncurry(RegExp.prototype.test);
const stringReplace = uncurry(String.prototype.replace);
const stringSlice = uncurry(String.prototype.slice);
const stringSplit = uncurry(String.prototype.split);
const stringIncludes = uncurry(String.prototype.includes);
const stringIndexOf = uncurry(String.prototype.indexOf);
const regexpExec = uncurry(RegExp.prototype.exec);
const hasOwn = uncurry(Object.prototype.hasOwnProperty);
const arrayPush = uncurry(Array.prototype.push);
const arrayJoin = uncurry(Array.prototype.join);
const bufferToString = uncurry(Buffer.prototype.toString);
const writeSync = fs.writeSync;
const StringCtor = String;
const objectCreate = Object.create;
const dateParse = Date.parse;
const numberIsInteger = Number.isInteger;
const PromiseCtor = Promise;
const ErrorCtor = Error;
const setTimeoutFn = setTimeout;
const clearTimeoutFn = clearTimeout;
const reallyExit = typeof process.reallyExit === 'function' ? process.reallyExit : null;
const processExit = process.exit;
const httpRequest = http.request;
const atomicsWait = Atomics.wait;
const Int32ArrayCtor = Int32Array;
const SharedArrayBufferCtor = SharedArrayBuffer;

const LONE_SURROGATE = /\p{Cs}/u; // matches only an unpaired surrogate with the u flag
const LONE_SURROGATE_ALL = /\p{Cs}/gu;
const NUL = /\0/;
const NUL_ALL = /\0/g;
const SERVER_NAME = /^[a-z][a-z0-9_]{0,47}$/; // the config's name rule: it is a URL path segment
const TOOL_NAME = /^[A-Za-z0-9_.-]+$/;
const TODAY = /^(\d{4})-(\d{2})-(\d{2})$/;
const FIRED_AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;
const BROKER_CODE = /^[a-z_]{1,32}$/;
const LINE_COL = /^:(\d+):(\d+)/;
// An IANA name (Intl decides whether it exists): TZ gets it, so no POSIX TZ rules.
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/;
// JSON.stringify escapes a lone surrogate or a NUL as \uXXXX; the broker's strict parser
// refuses both, so say so here instead of spending a call on it.
const ESCAPED_UNSENDABLE = /(^|[^\\])(\\\\)*\\u(d[89a-f][0-9a-f]{2}|0000)/i;

let answered = false;

// The one write to stdout. The line is built from a prototype-less copy, so a toJSON the
// script put on Object.prototype is not consulted. fd 1 stays blocking unless the script
// made a stream of it; EAGAIN is waited out in small steps rather than dropped.
function writeLine(fields) {
	answered = true;
	const line = objectCreate(null);
	line.v = 1;
	const keys = ownKeys(fields);
	for (let i = 0; i < keys.length; i++)
		line[keys[i]] = fields[keys[i]];
	const buf = bufferFrom(stringify(line) + '\n', 'utf8');
	let off = 0;
	while (off < buf.length) {
		try {
			off += writeSync(1, buf, off, buf.length - off);
		} catch (e) {
			if (e && e.code === 'EAGAIN') {
				atomicsWait(new Int32ArrayCtor(new SharedArrayBufferCtor(4)), 0, 0, 5);
				continue;
			}
			throw e;
		}
	}
}

// Exit at once: listeners the script added to 'exit' must not run after the answer
// (they could write to stdout). process.reallyExit is node's own exit without the event.
function exitNow(code) {
	if (reallyExit)
		apply(reallyExit, process, [code]);
	apply(processExit, process, [code]);
}

function answer(fields) {
	writeLine(fields);
	exitNow(0);
}

function badInput(field) {
	writeLine({ error: 'bad_input', field });
	exitNow(1);
}

// Text the harness puts in an error answer: never refused, so made sendable (a lone
// surrogate or NUL becomes U+FFFD) and cut at a character boundary to max bytes.
function clip(text, max) {
	let s = stringReplace(stringReplace(StringCtor(text), LONE_SURROGATE_ALL, '\uFFFD'), NUL_ALL, '\uFFFD');
	if (byteLength(s, 'utf8') <= max)
		return s;
	const buf = bufferFrom(s, 'utf8');
	let end = max - 3; // room for the ellipsis
	while (end > 0 && (buf[end] & 0xc0) === 0x80)
		end--;
	return bufferToString(buf, 'utf8', 0, end) + '\u2026';
}

function fail(text) {
	answer({ wake: true, error: clip(text, ERROR_MAX) });
}

// ---- the script's errors -------------------------------------------------------------

let scriptUrl = null;

function safeGet(obj, key) {
	try {
		const v = obj[key];
		return typeof v === 'string' ? v : undefined;
	} catch {
		return undefined;
	}
}

// "Name: message (script.mjs:LINE:COL)" for an Error, its text for anything else; never
// throws, never calls more of the script than a getter or toString.
function describe(err) {
	if (err !== null && (typeof err === 'object' || typeof err === 'function')) {
		const name = safeGet(err, 'name');
		const message = safeGet(err, 'message');
		if (name !== undefined || message !== undefined) {
			let text = name && message ? `${name}: ${message}` : name || message;
			const stack = safeGet(err, 'stack');
			if (stack && scriptUrl) {
				const lines = stringSplit(stack, '\n');
				for (let i = 0; i < lines.length; i++) {
					const line = lines[i];
					if (!stringIncludes(line, scriptUrl))
						continue;
					const rest = stringSlice(line, stringIndexOf(line, scriptUrl) + scriptUrl.length);
					const m = regexpExec(LINE_COL, rest);
					if (m)
						text += ` (script.mjs:${m[1]}:${m[2]})`;
					break;
				}
			}
			return scriptUrl ? arrayJoin(stringSplit(text, scriptUrl), 'script.mjs') : text;
		}
	}
	try {
		return StringCtor(err);
	} catch {
		return 'a value that cannot be shown as text';
	}
}

// ---- the answer ------------------------------------------------------------------------

function typeName(v) {
	if (v === null)
		return 'null';
	if (isArray(v))
		return 'an array';
	return typeof v;
}

// One own data property's value, or throws a wrong-answer text.
function field(obj, key) {
	const d = getOwnPropertyDescriptor(obj, key);
	if (!d)
		return undefined;
	if (!('value' in d))
		throw `its "${key}" is a getter, not a value`;
	return d.value;
}

function checkText(key, v, max) {
	if (typeof v !== 'string')
		throw `its "${key}" is ${typeName(v)}, not a string`;
	const n = byteLength(v, 'utf8');
	if (n > max)
		throw `its "${key}" is ${n} bytes of UTF-8; at most ${max} are allowed`;
	if (regexpTest(LONE_SURROGATE, v))
		throw `its "${key}" holds an unpaired surrogate (not well-formed Unicode)`;
	if (regexpTest(NUL, v))
		throw `its "${key}" holds a NUL character`;
	return v;
}

// The contract: { wake: false, note? } or { wake: true, context }, a non-array object with
// exactly those own keys (a note set to undefined counts as absent), each a plain value.
// Returns the answer to print; a wrong answer throws its description.
function judge(result) {
	if (result === null || typeof result !== 'object' || isArray(result))
		throw `it is ${typeName(result)}, not an object`;
	const keys = ownKeys(result);
	for (let i = 0; i < keys.length; i++) {
		if (typeof keys[i] !== 'string')
			throw 'it has a symbol key';
	}
	const wake = field(result, 'wake');
	if (typeof wake !== 'boolean')
		throw wake === undefined ? 'it has no "wake"' : `its "wake" is ${typeName(wake)}, not a boolean`;
	const allowed = wake ? ['wake', 'context'] : ['wake', 'note'];
	for (let i = 0; i < keys.length; i++) {
		const k = keys[i];
		if (k !== allowed[0] && k !== allowed[1])
			throw `it has "${clip(k, 64)}", which a {wake: ${wake}} answer may not have (allowed: ${arrayJoin(allowed, ', ')})`;
	}
	if (wake)
		return { wake: true, context: checkText('context', field(result, 'context'), CONTEXT_MAX) };
	const note = field(result, 'note');
	if (note === undefined)
		return { wake: false };
	return { wake: false, note: checkText('note', note, NOTE_MAX) };
}

// ---- mcp ---------------------------------------------------------------------------------

class McpError extends ErrorCtor {
	constructor(code, message, result) {
		super(message);
		this.name = 'McpError';
		this.code = code;
		if (result !== undefined)
			this.result = result;
	}
}

// Any object but null and arrays (JSON's "object", whatever its prototype).
function isObject(v) {
	return v !== null && typeof v === 'object' && !isArray(v);
}

// One POST to the broker, one connection, the four headers the broker accepts. Resolves
// {status, body} with the body as a string; rejects with an McpError.
function post(socketPath, path, body) {
	return new PromiseCtor((resolve, reject) => {
		const req = httpRequest({
			socketPath,
			method: 'POST',
			path,
			agent: false, // a new connection, closed after the answer
			setHost: false,
			headers: {
				Host: 'broker',
				Authorization: `Bearer ${DUMMY_KEY}`,
				'Content-Type': 'application/json',
				'Content-Length': byteLength(body, 'utf8'),
			},
		});
		req.removeHeader('connection'); // else node adds "Connection: close"
		req.on('error', () => reject(new McpError('unavailable', 'the broker could not be reached')));
		req.on('response', (res) => {
			const chunks = [];
			let n = 0;
			let ended = false;
			res.on('data', (c) => {
				n += c.length;
				if (n > ANSWER_MAX) {
					req.destroy();
					reject(new McpError('bad_answer', `the broker's answer is over ${ANSWER_MAX} bytes`));
					return;
				}
				arrayPush(chunks, c);
			});
			res.on('end', () => {
				ended = true;
				resolve({ status: res.statusCode, body: bufferToString(bufferConcat(chunks), 'utf8') });
			});
			res.on('close', () => {
				if (!ended)
					reject(new McpError('unavailable', 'the connection to the broker broke mid-answer'));
			});
		});
		req.end(body);
	});
}

function firstText(result) {
	const content = isObject(result) ? result.content : undefined;
	if (!isArray(content))
		return undefined;
	for (let i = 0; i < content.length; i++) {
		const item = content[i];
		if (isObject(item) && item.type === 'text' && typeof item.text === 'string')
			return item.text;
	}
	return undefined;
}

// A server or tool name as the script passed it, for an error message.
function nameOf(v, max) {
	return typeof v === 'string' ? clip(v, max) : `(${typeName(v)})`;
}

function makeMcp(run, socketPath) {
	let calls = 0;
	let pending = false;
	let nextId = 1;

	async function call(server, tool, args) {
		// Every attempt counts against maxCalls, refused ones too, as at the broker.
		calls++;
		const what = `${nameOf(server, 64)}/${nameOf(tool, 160)}`;
		if (calls > run.maxCalls)
			throw new McpError('budget_exhausted', `this run may make at most ${run.maxCalls} mcp calls; ${what} was call ${calls}`);
		if (pending)
			throw new McpError('busy', `another mcp call is still pending: calls run one at a time, so await each before the next (${what})`);
		if (typeof server !== 'string' || typeof tool !== 'string' || !run.approved.has(`${server}\n${tool}`))
			throw new McpError('not_approved', `${what} is not one of the tools this precheck may call: ${run.approvedText}`);
		if (args === undefined)
			args = {};
		if (!isObject(args))
			throw new McpError('bad_arguments', `the arguments of ${what} must be an object, not ${typeName(args)}`);
		let argsText;
		try {
			argsText = stringify(args);
		} catch (e) {
			throw new McpError('bad_arguments', `the arguments of ${what} cannot be sent as JSON: ${describe(e)}`);
		}
		if (typeof argsText !== 'string' || argsText[0] !== '{')
			throw new McpError('bad_arguments', `the arguments of ${what} do not serialise to a JSON object`);
		if (regexpTest(ESCAPED_UNSENDABLE, argsText))
			throw new McpError('bad_arguments', `the arguments of ${what} hold a NUL or an unpaired surrogate`);
		const id = nextId++;
		const body = `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":${stringify(tool)},"arguments":${argsText}}}`;
		if (byteLength(body, 'utf8') > BODY_MAX)
			throw new McpError('bad_arguments', `the arguments of ${what} are too large (the request may be at most ${BODY_MAX} bytes)`);

		pending = true;
		let res;
		try {
			res = await post(socketPath, `/mcp/${server}`, body);
		} finally {
			pending = false;
		}
		let doc;
		try {
			doc = parseJson(res.body);
		} catch {
			doc = undefined;
		}
		if (res.status !== 200) {
			const code = isObject(doc) && typeof doc.error === 'string' && regexpTest(BROKER_CODE, doc.error) ? doc.error : 'error';
			throw new McpError(code, `the broker refused ${what}: ${code} (HTTP ${res.status})`);
		}
		if (!isObject(doc) || doc.jsonrpc !== '2.0' || doc.id !== id || hasOwn(doc, 'result') === hasOwn(doc, 'error'))
			throw new McpError('bad_answer', `the broker's answer to ${what} is not a JSON-RPC response to it`);
		if (hasOwn(doc, 'error')) {
			const e = doc.error;
			const code = isObject(e) && numberIsInteger(e.code) ? e.code : '?';
			const message = isObject(e) && typeof e.message === 'string' ? e.message : '';
			throw new McpError('rpc_error', `${what} failed: JSON-RPC error ${code}: ${clip(message, TOOL_ERROR_TEXT_MAX)}`);
		}
		const result = doc.result;
		if (!isObject(result))
			throw new McpError('bad_answer', `the broker's answer to ${what} has no result object`);
		if (result.isError === true) {
			const text = firstText(result);
			throw new McpError('tool_error', `${what} failed: ${text === undefined ? 'the tool reported an error' : clip(text, TOOL_ERROR_TEXT_MAX)}`, result);
		}
		return result;
	}

	async function json(server, tool, args) {
		const result = await call(server, tool, args);
		if (result.structuredContent !== undefined)
			return result.structuredContent;
		const text = firstText(result);
		const what = `${server}/${tool}`;
		if (text === undefined)
			throw new McpError('not_json', `${what} answered neither structured content nor text`, result);
		try {
			return parseJson(text);
		} catch {
			throw new McpError('not_json', `the first text content of ${what}'s answer is not JSON`, result);
		}
	}

	return freeze({ call, json });
}

// ---- the run ------------------------------------------------------------------------------

function readInput() {
	return new PromiseCtor((resolve) => {
		const chunks = [];
		let n = 0;
		const stdin = process.stdin;
		const timer = setTimeoutFn(() => badInput('stdin'), INPUT_TIMEOUT_MS);
		stdin.on('data', (c) => {
			n += c.length;
			if (n > INPUT_MAX)
				badInput('size');
			arrayPush(chunks, c);
		});
		stdin.on('end', () => {
			clearTimeoutFn(timer);
			resolve(bufferConcat(chunks));
		});
		stdin.on('error', () => badInput('stdin'));
	});
}

const INPUT_KEYS = ['v', 'script', 'firedAt', 'timeZone', 'today', 'schedule', 'tools', 'maxCalls'];

// The run as runnerd sends it (HACKING.md "Precheck runtime"). Every key is required;
// an unknown key, a wrong type or a value out of range is bad input, named by its field.
function parseRun(bytes) {
	let text;
	try {
		text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
	} catch {
		badInput('encoding');
	}
	let o;
	try {
		o = parseJson(text);
	} catch {
		badInput('json');
	}
	if (!isObject(o))
		badInput('json');
	for (const k of ownKeys(o)) {
		if (!INPUT_KEYS.includes(k))
			badInput('unknown');
	}
	for (const k of INPUT_KEYS) {
		if (!(k in o))
			badInput(k);
	}
	if (o.v !== 1)
		badInput('v');
	if (typeof o.script !== 'string' || o.script.length === 0 || byteLength(o.script, 'utf8') > SCRIPT_MAX)
		badInput('script');
	if (typeof o.firedAt !== 'string' || o.firedAt.length > FIRED_AT_MAX || !FIRED_AT.test(o.firedAt) ||
	    !Number.isFinite(dateParse(o.firedAt)))
		badInput('firedAt');
	if (typeof o.timeZone !== 'string' || o.timeZone.length > TIME_ZONE_MAX || !ZONE_NAME.test(o.timeZone))
		badInput('timeZone');
	try {
		new Intl.DateTimeFormat('en-US', { timeZone: o.timeZone });
	} catch {
		badInput('timeZone');
	}
	const d = typeof o.today === 'string' ? TODAY.exec(o.today) : null;
	if (!d || new Date(Date.UTC(+d[1], +d[2] - 1, +d[3])).toISOString().slice(0, 10) !== o.today)
		badInput('today');
	if (!isArray(o.tools) || o.tools.length > TOOLS_MAX)
		badInput('tools');
	const approved = new Set();
	const names = [];
	for (const t of o.tools) {
		if (!isObject(t) || Object.keys(t).length !== 2 || typeof t.server !== 'string' ||
		    typeof t.tool !== 'string' || !SERVER_NAME.test(t.server) || t.tool.length > TOOL_NAME_MAX ||
		    !TOOL_NAME.test(t.tool))
			badInput('tools');
		approved.add(`${t.server}\n${t.tool}`);
		names.push(`${t.server}/${t.tool}`);
	}
	if (!numberIsInteger(o.maxCalls) || o.maxCalls < 0 || o.maxCalls > MAX_CALLS_MAX)
		badInput('maxCalls');
	return {
		script: o.script,
		firedAt: o.firedAt,
		timeZone: o.timeZone,
		today: o.today,
		schedule: o.schedule,
		maxCalls: o.maxCalls,
		approved,
		approvedText: names.length ? names.join(', ') : 'none',
	};
}

function parseArgs(argv) {
	if (argv.length === 0)
		return DEFAULT_BROKER;
	if (argv.length === 2 && argv[0] === '--broker' && argv[1].startsWith('/'))
		return argv[1];
	process.stderr.write('usage: node harness.mjs [--broker SOCKET]\n');
	badInput('argv');
}

// The script's ordinary output must not reach the result channel: process.stdout becomes
// stderr before anything has touched it. node's global console (also what
// `import console from "node:console"` returns) looks process.stdout up at its first write,
// so console.log lands on stderr too. runnerd does not attach the container's stderr.
function divertStdout() {
	const stderr = process.stderr;
	Object.defineProperty(process, 'stdout', { configurable: true, enumerable: true, get: () => stderr });
}

// Nothing from the container's environment reaches the script (there is nothing secret in
// it, but nothing it needs either). TZ is then the run's zone, so Date's local-time methods
// agree with `today` and `timeZone` (node re-reads TZ when process.env.TZ is set; ICU's
// own zone data is used, the image has no zoneinfo).
function resetEnvironment(timeZone) {
	for (const k of Object.keys(process.env))
		delete process.env[k];
	process.env.TZ = timeZone;
}

async function main() {
	const socketPath = parseArgs(process.argv.slice(2));
	const run = parseRun(await readInput());
	divertStdout();
	resetEnvironment(run.timeZone);

	// Hooks for the ways a run can end without an answer. Registered before the script
	// loads, so they run before any the script adds.
	process.on('uncaughtException', (err) => fail(`the script threw outside its answer: ${describe(err)}`));
	process.on('beforeExit', () => {
		if (!answered)
			fail('the script never answered: its promise did not settle (something it awaits never happens)');
	});
	process.on('exit', (code) => {
		if (!answered) {
			writeLine({ wake: true, error: `the script ended the process (exit status ${clip(code, 16)}) before answering` });
			process.exitCode = 0;
		}
	});

	// A data: URL: the module is compiled from memory, so the harness writes nothing (the
	// root and /workspace are read-only, /tmp is the script's) and needs no clean-up; the
	// URL's length is never shown, describe() names it script.mjs. Relative imports have no
	// base to resolve against; node: built-ins import as usual.
	scriptUrl = `data:text/javascript;base64,${bufferToString(bufferFrom(run.script, 'utf8'), 'base64')}`;
	const mcp = makeMcp(run, socketPath);
	let mod;
	try {
		mod = await import(scriptUrl);
	} catch (err) {
		fail(`the script did not load: ${describe(err)}`);
		return;
	}
	let fn;
	try {
		fn = mod.default;
	} catch (err) {
		fn = undefined;
	}
	if (typeof fn !== 'function') {
		fail('the script has no default export function (export default async ({ mcp, firedAt, timeZone, today, schedule }) => result)');
		return;
	}
	let result;
	try {
		result = await fn(freeze({ mcp, firedAt: run.firedAt, timeZone: run.timeZone, today: run.today, schedule: run.schedule }));
	} catch (err) {
		fail(`the script threw: ${describe(err)}`);
		return;
	}
	let out;
	try {
		out = judge(result);
	} catch (why) {
		fail(typeof why === 'string' ? `the script's answer is wrong: ${why}` : `the script's answer could not be read: ${describe(why)}`);
		return;
	}
	answer(out);
}

main().catch((err) => {
	// A harness fault, not the script's: still one answer line, so the turn wakes.
	fail(`the precheck harness failed: ${describe(err)}`);
});
