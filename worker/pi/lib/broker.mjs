// SPDX-License-Identifier: Apache-2.0
// The way out: HTTP/1.1 to brokerd's rich listener on the channel's Unix socket (DESIGN.md
// 8.5; rich-design.md section 4). One undici Agent bound to the socket is made the global
// dispatcher, so every fetch in this process (the Anthropic SDK's inside pi-ai, and the
// worker's own calls below) goes to the broker and nowhere else: the container has no
// network anyway, and "http://broker/..." names no host.

import { Agent, fetch, setGlobalDispatcher } from "undici";
import { WORKER_DUMMY_KEY } from "./limits.mjs";

export const BROKER_ORIGIN = "http://broker";

let dispatcher;

/** Route all of this process's HTTP to socketPath. No timeouts here: every call carries its
 * own AbortSignal (a long poll, the turn's deadline). */
export function useBrokerSocket(socketPath) {
	dispatcher = new Agent({ connect: { socketPath }, headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 1000 });
	setGlobalDispatcher(dispatcher);
}

/** An error of a broker call: status 0 when there was no answer (the socket is gone, the
 * call was aborted or timed out). code: the broker's error code when it gave one. */
export class BrokerError extends Error {
	constructor(path, status, code, cause) {
		super(status ? `broker ${path}: HTTP ${status}${code ? ` (${code})` : ""}` : `broker ${path}: ${cause ?? "no answer"}`);
		this.name = "BrokerError";
		this.path = path;
		this.status = status;
		this.code = code;
	}
}

async function readBounded(response, maxBytes, path) {
	const chunks = [];
	let n = 0;
	if (!response.body) return Buffer.alloc(0);
	for await (const chunk of response.body) {
		n += chunk.length;
		if (n > maxBytes) {
			throw new BrokerError(path, response.status, undefined, `answer larger than ${maxBytes} bytes`);
		}
		chunks.push(chunk);
	}
	return Buffer.concat(chunks, n);
}

function signalFor(signal, timeoutMs) {
	const timeout = timeoutMs !== undefined ? AbortSignal.timeout(Math.max(1, timeoutMs)) : undefined;
	if (signal && timeout) return AbortSignal.any([signal, timeout]);
	return signal ?? timeout;
}

/**
 * POST path with body (an object, sent as JSON; or a ready string). Resolves to
 * {status, body: Buffer}; 204 has an empty body. A transport failure, an abort, a timeout or
 * an answer over maxBytes rejects with a BrokerError (status 0, or the answer's status).
 */
export async function brokerPost(path, body, { signal, timeoutMs, maxBytes }) {
	let response;
	try {
		response = await fetch(BROKER_ORIGIN + path, {
			method: "POST",
			dispatcher,
			headers: { "content-type": "application/json", authorization: `Bearer ${WORKER_DUMMY_KEY}` },
			body: typeof body === "string" ? body : JSON.stringify(body ?? {}),
			signal: signalFor(signal, timeoutMs),
		});
	} catch (e) {
		throw new BrokerError(path, 0, undefined, e?.cause?.code ?? e?.name ?? "failed");
	}
	try {
		return { status: response.status, body: await readBounded(response, maxBytes, path) };
	} catch (e) {
		if (e instanceof BrokerError) throw e;
		throw new BrokerError(path, 0, undefined, e?.name ?? "failed");
	}
}

/** brokerPost, then JSON: resolves to the parsed answer of a 200, undefined for 204; any
 * other status rejects with a BrokerError carrying the broker's error code. */
export async function brokerJson(path, body, options) {
	const { status, body: raw } = await brokerPost(path, body, options);
	if (status === 204) return undefined;
	let parsed;
	try {
		parsed = raw.length ? JSON.parse(raw.toString("utf8")) : undefined;
	} catch {
		throw new BrokerError(path, status, undefined, "answer is not JSON");
	}
	if (status !== 200) {
		const code = parsed && typeof parsed.error === "string" ? parsed.error.slice(0, 64) : undefined;
		throw new BrokerError(path, status, code);
	}
	return parsed;
}
