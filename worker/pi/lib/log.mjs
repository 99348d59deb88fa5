// SPDX-License-Identifier: Apache-2.0
// The worker's log: one JSON object per line on stdout (the container's log driver keeps it;
// runnerd logs the last 200 lines of a timed-out worker). Seed ("Pi isolation and
// continuity"): model errors, broker call failures, tool failures and compactions. Never a
// guest's text, a tool's arguments or result, a prompt block or a file: only names, ids,
// counts, statuses and the worker's own words.

const ERROR_CHARS_MAX = 2000;

/** Cut a diagnostic (an exception message, never guest data) to a bounded length. */
export function bounded(text, max = ERROR_CHARS_MAX) {
	const s = String(text ?? "");
	return s.length > max ? `${s.slice(0, max)}…` : s;
}

/** log("msg", {fields}): one line on stdout. Fields must be JSON-serialisable. */
export function log(msg, fields = {}) {
	let line;
	try {
		line = JSON.stringify({ time: new Date().toISOString(), app: "pi-worker", msg, ...fields });
	} catch {
		line = JSON.stringify({ time: new Date().toISOString(), app: "pi-worker", msg });
	}
	process.stdout.write(`${line}\n`);
}

/** The message of an error value, bounded (for logs only). */
export function errorText(e) {
	return bounded(e instanceof Error ? e.message : e);
}
