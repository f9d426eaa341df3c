/**
 * The daemon's provider (daemon/openai-provider.ts) sends chat requests over its own pooled connections,
 * not through the `openai` SDK's request pipeline (issue 20 target 3), but promises to answer and fail
 * exactly as the SDK does with `maxRetries: 0`: engine/classify.ts, the retry policy and the ledger's
 * error entries were written against the SDK's errors. Here the real SDK is the reference: the same
 * request, over HTTP to the simulator, through both, for every kind of answer the simulator can give.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatRequest } from '../../src/domain/prompts.js';
import { createOpenAIProvider } from '../../src/daemon/openai-provider.js';
import type { Provider } from '../../src/daemon/engine/provider.js';
import { createSimulator, type FaultRule, type Simulator } from '../../src/sim/simulator.js';

const KEY = 'sk-parity-test-key';
const TIMEOUT_MS = 400;
const request: ChatRequest = {
  model: 'test-model',
  messages: [
    { role: 'system', content: 'You write user stories.' },
    { role: 'user', content: 'Epic id: E1\nTitle: Parity' },
  ],
} as ChatRequest;

let sim: Simulator;
let ours: Provider;
let sdk: OpenAI;

beforeAll(async () => {
  sim = await createSimulator();
  ours = createOpenAIProvider(
    {
      baseURL: sim.url,
      apiKey: KEY,
      model: 'test-model',
      temperature: 0,
      maxTokens: 1000,
      callTimeoutMs: TIMEOUT_MS,
      responseFormat: 'json_object',
      maxAnswerBytes: 1 << 20,
    } as never,
    8,
  );
  sdk = new OpenAI({ baseURL: sim.url, apiKey: KEY, maxRetries: 0, timeout: TIMEOUT_MS });
});
afterAll(() => sim?.close());

/** What a caller can tell of an outcome: the error's class, status, message, error body and the headers classify reads. */
function outcome(result: PromiseSettledResult<unknown>): object {
  if (result.status === 'fulfilled') return { ok: true };
  const e = result.reason as InstanceType<typeof OpenAI.APIError>;
  return {
    class: e.constructor.name,
    isAPIError: e instanceof OpenAI.APIError,
    status: e.status,
    message: e.message,
    error: e.error,
    retryAfter: e.headers?.get('retry-after') ?? null,
    requestId: e.requestID ?? null,
  };
}

/**
 * One request through each client with the same fault in force (each client gets its own fault). Ours gets
 * the engine's deadline as the executor gives it: its signal, aborted with a `TimeoutError` at TIMEOUT_MS.
 */
async function both(fault: FaultRule | null, req: ChatRequest = request) {
  sim.setFaults(fault ? [{ ...fault, times: 1 }] : []);
  const [mine] = await Promise.allSettled([ours.send(req, AbortSignal.timeout(TIMEOUT_MS), {})]);
  sim.setFaults(fault ? [{ ...fault, times: 1 }] : []);
  const [theirs] = await Promise.allSettled([sdk.chat.completions.create(req as never).withResponse()]);
  return { mine: mine!, theirs: theirs! };
}

describe('the provider answers as the openai SDK does', () => {
  it('a 200: the same completion, request id and rate-limit headers', async () => {
    sim.setRateLimitHeaders({ 'remaining-requests': '41', 'reset-requests': '6s' });
    const { mine, theirs } = await both(null);
    expect(mine.status).toBe('fulfilled');
    expect(theirs.status).toBe('fulfilled');
    if (mine.status !== 'fulfilled' || theirs.status !== 'fulfilled') return;
    const body = JSON.parse(mine.value.bodyText);
    // The simulator numbers its completions and stamps them with the second they were made (two calls can
    // straddle a second): all but the id and that stamp are the same answer.
    expect({ ...body, id: null, created: null }).toEqual({ ...theirs.value.data, id: null, created: null });
    expect(Math.abs(body.created - theirs.value.data.created)).toBeLessThanOrEqual(1);
    expect(mine.value.requestId).toMatch(/^sim-req-\d+$/);
    expect(theirs.value.request_id).toMatch(/^sim-req-\d+$/);
    expect(mine.value.rateLimit).toMatchObject({ 'x-ratelimit-remaining-requests': '41', 'x-ratelimit-reset-requests': '6s' });
    expect(theirs.value.response.headers.get('x-ratelimit-remaining-requests')).toBe('41');
  });

  it.each<[string, FaultRule]>([
    ['a 429 with Retry-After', { kind: 'rate_limit', retry_after_s: 7 }],
    ['a 500', { kind: 'server_error' }],
    ['a 401 (the key echoed back)', { kind: 'auth' }],
    ['a 400', { kind: 'bad_request' }],
    ['a 400 refusing json_schema', { kind: 'json_schema_unsupported' }],
  ])('%s: the same error class, status, message and body', async (_name, fault) => {
    const { mine, theirs } = await both(fault, fault.kind === 'json_schema_unsupported' ? withJsonSchema() : request);
    expect(mine.status).toBe('rejected');
    const a = outcome(mine) as Record<string, unknown>;
    const b = outcome(theirs) as Record<string, unknown>;
    // Request ids differ by one call; each client reports its own.
    expect({ ...a, requestId: null }).toEqual({ ...b, requestId: null });
    expect(a.requestId).toMatch(/^sim-req-\d+$/);
  });

  it('a dropped connection: APIConnectionError, as the SDK', async () => {
    const { mine, theirs } = await both({ kind: 'disconnect' });
    expect(outcome(mine)).toEqual(outcome(theirs));
    expect(outcome(mine)).toMatchObject({ class: 'APIConnectionError', status: undefined });
  });

  it('no answer within the timeout: APIConnectionTimeoutError, as the SDK', async () => {
    const { mine, theirs } = await both({ kind: 'hang', hang_ms: TIMEOUT_MS * 5 });
    expect(outcome(mine)).toEqual(outcome(theirs));
    expect(outcome(mine)).toMatchObject({ class: 'APIConnectionTimeoutError' });
  });

  it('the caller aborts: APIUserAbortError, as the SDK', async () => {
    const abortSoon = () => {
      const c = new AbortController();
      setTimeout(() => c.abort(), 50);
      return c.signal;
    };
    sim.setFaults([{ kind: 'hang', times: 2 }]);
    const mine = await Promise.allSettled([ours.send(request, abortSoon(), {})]);
    const theirs = await Promise.allSettled([sdk.chat.completions.create(request as never, { signal: abortSoon(), timeout: TIMEOUT_MS * 10 })]);
    expect(outcome(mine[0]!)).toEqual(outcome(theirs[0]!));
    expect(outcome(mine[0]!)).toMatchObject({ class: 'APIUserAbortError' });
  });
});

function withJsonSchema(): ChatRequest {
  return {
    ...request,
    response_format: { type: 'json_schema', json_schema: { name: 'parity', schema: { type: 'object' }, strict: false } },
  } as ChatRequest;
}
