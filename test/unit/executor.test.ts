/**
 * The executor's deadline and the user's cancel (engine/executor.ts, issue 20 target 3: one abort signal per
 * call, the item's own controller, aborted by either): the real provider against the simulator's `hang`.
 * - the deadline: PROVIDER_TIMEOUT, transient, with the SDK's timeout message;
 * - a cancel before the deadline: CANCELED;
 * - a cancel after the deadline fired but before the call settled: CANCELED, as a cancel before it (review R1);
 * - a settled call leaves no listener on the item's signal;
 * - the deadline once the headers have come and the body stalls (an inline server, not the simulator, whose
 *   `hang` stalls before the headers): PROVIDER_TIMEOUT, transient, as before them (review-merge R3).
 */
import { getEventListeners } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatRequest } from '../../src/domain/prompts.js';
import { createOpenAIProvider } from '../../src/daemon/openai-provider.js';
import { cancelCall, executeCall, type CallOutcome, type ItemAbort } from '../../src/daemon/engine/executor.js';
import type { Provider } from '../../src/daemon/engine/provider.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';

/** Long enough that only the cases that wait for it see it: none of them depends on how long it is. */
const NEVER_MS = 600_000;
const SHORT_MS = 50;
/** A deadline the inline server's headers and first bytes, on loopback, come well within (checked: `bodiesStarted`). */
const BODY_STALL_MS = 300;
const request = { model: 'test-model', messages: [{ role: 'user', content: 'Epic id: E1\nTitle: Deadline' }] } as ChatRequest;

let sim: Simulator;
let provider: Provider;
/** Answers every request with a 200's headers and the start of a chat completion, then never writes again. */
let stalling: Server;
let stallingProvider: Provider;
/** Requests `stalling` has written its headers and part of a body to. */
let bodiesStarted = 0;

function providerAt(baseURL: string): Provider {
  const config = { baseURL, apiKey: 'sk-executor-test', model: 'test-model', temperature: 0, maxTokens: 1000, callTimeoutMs: NEVER_MS };
  return createOpenAIProvider({ ...config, responseFormat: 'json_object', maxAnswerBytes: 1 << 20 } as never, 4);
}

beforeAll(async () => {
  sim = await createSimulator();
  provider = providerAt(sim.url);
  stalling = createServer((req, res) => {
    req.resume();
    req.once('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req-stall' });
      res.write('{"id":"chatcmpl-stall","object":"chat.completion","created":1,"model":"test-model","choices":[{"index":0,', () => {
        bodiesStarted++;
      });
    });
  });
  await new Promise<void>((resolve) => stalling.listen(0, '127.0.0.1', resolve));
  stallingProvider = providerAt(`http://127.0.0.1:${(stalling.address() as AddressInfo).port}/v1`);
});
afterAll(async () => {
  await sim?.close();
  stalling?.closeAllConnections();
  await new Promise((resolve) => stalling?.close(resolve));
});

function call(abort: ItemAbort, timeoutMs: number, to: Provider = provider): Promise<CallOutcome> {
  return executeCall(to, request, { cancel: abort, timeoutMs, now: Date.now });
}

function newAbort(): ItemAbort {
  return { controller: new AbortController(), canceledByUser: false };
}

/** Waits until the simulator has received `n` requests in all. */
async function received(n: number): Promise<void> {
  while (sim.calls.length < n) await new Promise((r) => setTimeout(r, 5));
}

function errorOf(o: CallOutcome) {
  if (o.kind !== 'error') throw new Error(`expected an error, got an answer (${o.httpStatus})`);
  return o.error;
}

describe('the executor', () => {
  it('the deadline: a timeout, transient, with the SDK timeout message; the item signal aborted with a TimeoutError', async () => {
    sim.setFaults([{ kind: 'hang' }]);
    const abort = newAbort();
    const error = errorOf(await call(abort, SHORT_MS));
    expect(error).toMatchObject({ code: 'PROVIDER_TIMEOUT', class: 'transient', message: 'the provider did not answer in time: Request timed out.' });
    expect((abort.controller.signal.reason as DOMException).name).toBe('TimeoutError');
    expect(getEventListeners(abort.controller.signal, 'abort')).toEqual([]);
  });

  it('the deadline once the headers came and the body stalls: the same timeout as before the headers (code, class, message), no listener left', async () => {
    sim.setFaults([{ kind: 'hang' }]);
    const beforeHeaders = errorOf(await call(newAbort(), SHORT_MS));
    const abort = newAbort();
    const error = errorOf(await call(abort, BODY_STALL_MS, stallingProvider));
    // The server wrote its headers and part of the body before the call ended: the deadline fired while the body was read.
    expect(bodiesStarted).toBe(1);
    expect((abort.controller.signal.reason as DOMException).name).toBe('TimeoutError');
    // The same failure as a stall before the headers: code, class and message (not Node's bare "aborted").
    expect(error).toEqual(beforeHeaders);
    expect(getEventListeners(abort.controller.signal, 'abort')).toEqual([]);
  });

  it('a cancel before the deadline: CANCELED', async () => {
    sim.setFaults([{ kind: 'hang' }]);
    const abort = newAbort();
    const before = sim.calls.length;
    const outcome = call(abort, NEVER_MS);
    await received(before + 1);
    cancelCall(abort);
    expect(errorOf(await outcome)).toMatchObject({ code: 'CANCELED', class: 'canceled' });
    expect(getEventListeners(abort.controller.signal, 'abort')).toEqual([]);
  });

  it('a cancel after the deadline fired, before the call settled: CANCELED, as a cancel before it', async () => {
    sim.setFaults([{ kind: 'hang' }]);
    const abort = newAbort();
    // Registered before the provider's own listener, so it runs first: the deadline has aborted the
    // controller, and the provider has not yet failed the call.
    abort.controller.signal.addEventListener('abort', () => cancelCall(abort), { once: true });
    const error = errorOf(await call(abort, SHORT_MS));
    expect((abort.controller.signal.reason as DOMException).name).toBe('TimeoutError');
    expect(error).toMatchObject({ code: 'CANCELED', class: 'canceled' });
  });

  it('an answer: no listener left on the item signal, which nothing aborted', async () => {
    sim.setFaults([]);
    const abort = newAbort();
    const outcome = await call(abort, NEVER_MS);
    expect(outcome.kind).toBe('response');
    expect(abort.controller.signal.aborted).toBe(false);
    expect(getEventListeners(abort.controller.signal, 'abort')).toEqual([]);
  });
});
