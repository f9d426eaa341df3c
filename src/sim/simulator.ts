/**
 * A deterministic OpenAI-compatible chat completions server for the demo and the tests, with fault
 * injection: 429 + Retry-After, 5xx, hangs, connection drops (before or in the middle of the answer),
 * 401/400, a server that refuses JSON-schema response formats, malformed, huge and schema-invalid
 * answers, and answers that echo the caller's API key. The same prompt always gets the same answer,
 * valid against the JSON schema of its response format, whatever the operation (see answers.ts).
 *
 * Control endpoints (JSON): GET /_sim/stats, POST /_sim/faults (replace the rules), POST /_sim/reset.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { echoInAnswer, seeded, simulatedContent } from './answers.js';
import { systemClock } from '../core/clock.js';

export const FAULT_KINDS = [
  'rate_limit',
  'server_error',
  'hang',
  /** Held until `release()`, then answered as without a fault: a call in flight for as long as a test needs. */
  'hold',
  'disconnect',
  'malformed',
  'schema_invalid',
  'not_json',
  'auth',
  'bad_request',
  /** A 200 answer that echoes the API key (and `text`) in its body, request id and a rate-limit header. */
  'echo_secret',
  /** A 200 answer of `size_bytes` (default 30 MB), with a Content-Length unless `chunked`. */
  'huge',
  /** A 200 answer whose connection is reset after half of its body. */
  'reset_mid_body',
  /** 400 for a request with a `json_schema` response format (older local servers); others are answered. */
  'json_schema_unsupported',
  /** A 200 answer with `text` appended to its first text field: what a model may emit (a U+0000, say) in valid JSON. */
  'append_text',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultRule {
  kind: FaultKind;
  /** Applies to requests whose messages contain this text (e.g. "Epic id: E3"); all requests if absent. */
  match?: string;
  /** Applies only to requests for this model (the request's `model`). */
  model?: string;
  /** How many matching requests get the fault; unlimited if absent. */
  times?: number;
  /** For rate_limit: the Retry-After header, in seconds. */
  retry_after_s?: number;
  /** For hang: answer normally after this long; never answer if absent. */
  hang_ms?: number;
  /**
   * For rate_limit: send `x-ratelimit-remaining-requests: 0` and this `x-ratelimit-reset-requests`
   * (e.g. "2s", "1m30s") — without Retry-After, as some providers do.
   */
  reset_requests?: string;
  /** For echo_secret: more text to echo (another secret); for append_text: the text appended; for bad_request: the error's message. */
  text?: string;
  /** For echo_secret: answer a body that is not JSON (recorded as text). */
  malformed?: boolean;
  /** For huge: the answer's size in bytes. */
  size_bytes?: number;
  /** For huge: send it chunked, without a Content-Length. */
  chunked?: boolean;
}

/** The `x-ratelimit-*` headers every answer carries (OpenAI's names); values are sent as given. */
export type RateLimitHeaderValues = Partial<
  Record<'limit-requests' | 'remaining-requests' | 'reset-requests' | 'limit-tokens' | 'remaining-tokens' | 'reset-tokens', string>
>;

export interface SimulatorOptions {
  port?: number;
  host?: string;
  /** Delay before every answer. */
  latencyMs?: number;
  /** Share of requests (0–1) that get a random transient fault, chosen by a seeded generator. */
  faultRate?: number;
  seed?: number;
  faults?: FaultRule[];
  rateLimitHeaders?: RateLimitHeaderValues;
  /** Called as each completion request arrives, before any latency or fault (benchmarks time it). */
  onCall?: (call: SimCall) => void;
}

export interface SimCall {
  n: number;
  /** What was asked: the response format's schema name (the operation's name), or null without one. */
  operation: string | null;
  /** The built-ins' prompts name these (`Epic id: …`, `Briefing date: …`): tests filter calls by them. */
  epic_id: string | null;
  briefing_date: string | null;
  fault: FaultKind | null;
  repair: boolean;
  /** The request's `model`. */
  model: string | null;
  /** The request's `traceparent` header (W3C Trace Context), if it sent one. */
  traceparent: string | null;
  at: number;
  /** The HTTP status answered (200 = a paid answer), or null while unanswered / when the connection was dropped. */
  status: number | null;
}

export interface Simulator {
  url: string;
  port: number;
  calls: SimCall[];
  /** TCP connections accepted since start (a client reusing keep-alive connections opens few). */
  readonly connections: number;
  setFaults(rules: FaultRule[]): void;
  setLatency(ms: number): void;
  /** Answers every request a `hold` fault holds now (as without a fault); returns how many. */
  release(): number;
  setRateLimitHeaders(values: RateLimitHeaderValues): void;
  reset(): void;
  close(): Promise<void>;
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}, call?: SimCall): void {
  if (call) call.status = status;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** A chat completion answering `content` to a prompt of `promptText`, with usage. */
function completionBody(n: number, model: string | undefined, content: string, promptText: string, extra: Record<string, unknown> = {}) {
  const promptTokens = Math.ceil(promptText.length / 4);
  const completionTokens = Math.ceil(content.length / 4);
  return {
    id: `chatcmpl-sim-${n}`,
    object: 'chat.completion',
    created: Math.floor(systemClock.now() / 1000),
    model: model ?? 'sim',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
    ...extra,
  };
}

/** A valid-looking completion padded to `size` bytes, written in 64 KiB chunks. */
function sendHuge(res: http.ServerResponse, size: number, chunked: boolean, headers: Record<string, string>, call: SimCall): void {
  call.status = 200;
  const head = '{"id":"chatcmpl-sim-huge","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"';
  const tail = '"}}]}';
  const pad = Math.max(0, size - head.length - tail.length);
  res.writeHead(200, { 'content-type': 'application/json', ...(chunked ? {} : { 'content-length': String(head.length + pad + tail.length) }), ...headers });
  res.write(head);
  const chunk = 'x'.repeat(65536);
  let left = pad;
  const pump = () => {
    while (left > 0) {
      const n = Math.min(left, chunk.length);
      left -= n;
      if (!res.write(n === chunk.length ? chunk : chunk.slice(0, n))) return void res.once('drain', pump);
    }
    res.end(tail);
  };
  res.on('close', () => (left = 0));
  pump();
}

export async function createSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  let rules: (FaultRule & { used: number })[] = (opts.faults ?? []).map((r) => ({ ...r, used: 0 }));
  let latencyMs = opts.latencyMs ?? 0;
  let rateLimitValues: RateLimitHeaderValues = opts.rateLimitHeaders ?? {
    'limit-requests': '10000',
    'remaining-requests': '9999',
    'reset-requests': '6ms',
  };
  const random = seeded(opts.seed ?? 42);
  const calls: SimCall[] = [];
  const hanging = new Set<http.ServerResponse>();
  const held = new Set<() => void>();

  function pickFault(text: string, model: string | undefined): FaultRule | null {
    for (const r of rules) {
      if (r.match !== undefined && !text.includes(r.match)) continue;
      if (r.model !== undefined && r.model !== model) continue;
      if (r.times !== undefined && r.used >= r.times) continue;
      r.used++;
      return r;
    }
    const rate = opts.faultRate ?? 0;
    if (rate > 0 && random() < rate) {
      const transient: FaultKind[] = ['rate_limit', 'server_error', 'disconnect', 'malformed', 'schema_invalid'];
      return { kind: transient[Math.floor(random() * transient.length)]!, retry_after_s: 1 };
    }
    return null;
  }

  async function completions(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const raw = await readBody(req);
    let body: {
      model?: string;
      messages?: { role: string; content: string }[];
      response_format?: { type?: string; json_schema?: { name?: string; schema?: Record<string, unknown> } };
    };
    try {
      body = JSON.parse(raw);
    } catch {
      return sendJson(res, 400, { error: { message: 'request body is not JSON', type: 'invalid_request_error' } });
    }
    const messages = body.messages ?? [];
    const text = messages.map((m) => m.content).join('\n');
    const repair = messages.some((m) => m.role === 'assistant');
    const format = body.response_format?.json_schema;
    const simRequest = { schemaName: format?.name ?? null, schema: format?.schema ?? null, messages };
    const fault = pickFault(text, body.model);
    const n = calls.length + 1;
    const call: SimCall = {
      n,
      operation: format?.name ?? null,
      epic_id: /Epic id: (.+)/.exec(text)?.[1]?.trim() ?? null,
      briefing_date: /Briefing date: (.+)/.exec(text)?.[1]?.trim() ?? null,
      fault: fault?.kind ?? null,
      repair,
      model: body.model ?? null,
      traceparent: typeof req.headers.traceparent === 'string' ? req.headers.traceparent : null,
      at: systemClock.now(),
      status: null,
    };
    calls.push(call);
    opts.onCall?.(call);
    if (latencyMs > 0) await new Promise((r) => setTimeout(r, latencyMs));
    const requestId = `sim-req-${n}`;
    const headers: Record<string, string> = { 'x-request-id': requestId };
    for (const [k, v] of Object.entries(rateLimitValues)) headers[`x-ratelimit-${k}`] = v;

    if (fault?.kind === 'hold') {
      await new Promise<void>((resolve) => {
        held.add(resolve);
        res.on('close', () => held.delete(resolve));
      });
      if (res.destroyed) return;
    }

    switch (fault?.kind) {
      case 'rate_limit':
        return sendJson(
          res,
          429,
          { error: { message: 'Rate limit reached (simulated)', type: 'rate_limit_error' } },
          {
            ...headers,
            ...(fault.reset_requests !== undefined
              ? { 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': fault.reset_requests }
              : { 'retry-after': String(fault.retry_after_s ?? 1) }),
          },
          call,
        );
      case 'server_error':
        return sendJson(res, 500, { error: { message: 'The server had an error (simulated)', type: 'server_error' } }, headers, call);
      case 'auth': {
        // Like real providers, echo the key that was sent: redaction must keep it out of logs and the ledger.
        const key = String(req.headers.authorization ?? '').replace(/^Bearer\s+/i, '');
        return sendJson(res, 401, { error: { message: `Incorrect API key provided: ${key} (simulated)`, type: 'invalid_request_error' } }, headers, call);
      }
      case 'bad_request':
        return sendJson(res, 400, { error: { message: fault.text ?? 'Invalid request (simulated)', type: 'invalid_request_error' } }, headers, call);
      case 'disconnect':
        req.socket.destroy();
        return;
      case 'json_schema_unsupported':
        if (body.response_format?.type !== 'json_schema') break;
        return sendJson(
          res,
          400,
          { error: { message: "response_format of type 'json_schema' is not supported by this server (simulated)", type: 'invalid_request_error' } },
          headers,
          call,
        );
      case 'huge':
        return sendHuge(res, fault.size_bytes ?? 30 * 2 ** 20, fault.chunked === true, headers, call);
      case 'reset_mid_body': {
        const text = JSON.stringify({
          id: `chatcmpl-sim-${n}`,
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(4096) } }],
        });
        call.status = 200;
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
        res.write(text.slice(0, text.length / 2), () => setTimeout(() => req.socket.resetAndDestroy(), 20));
        return;
      }
      case 'echo_secret': {
        const key = String(req.headers.authorization ?? '').replace(/^Bearer\s+/i, '');
        const echo = [key, fault.text].filter(Boolean).join(' ');
        headers['x-request-id'] = `req-${echo}`;
        headers['x-ratelimit-echo'] = echo;
        if (fault.malformed) {
          call.status = 200;
          res.writeHead(200, { 'content-type': 'application/json', ...headers });
          return void res.end(`{"error": not json, your key is ${echo}`);
        }
        const answer = JSON.stringify(echoInAnswer(JSON.parse(simulatedContent(simRequest, null)), `(key: ${echo})`));
        return sendJson(res, 200, completionBody(n, body.model, answer, text, { system_fingerprint: echo }), headers, call);
      }
      case 'append_text': {
        const answer = JSON.stringify(echoInAnswer(JSON.parse(simulatedContent(simRequest, null)), fault.text ?? ''));
        return sendJson(res, 200, completionBody(n, body.model, answer, text), headers, call);
      }
      case 'hang':
        if (fault.hang_ms === undefined) {
          hanging.add(res);
          res.on('close', () => hanging.delete(res));
          return;
        }
        await new Promise((r) => setTimeout(r, fault.hang_ms));
        break;
      case 'malformed': {
        const text = '{"id":"chatcmpl-sim","choices":[{"message":{"role":"assistant","content":';
        call.status = 200;
        res.writeHead(200, { 'content-type': 'application/json', ...headers });
        res.end(text);
        return;
      }
      default:
        break;
    }

    const brokenAs = fault?.kind === 'schema_invalid' || fault?.kind === 'not_json' ? fault.kind : null;
    const content = simulatedContent(simRequest, brokenAs);
    sendJson(res, 200, completionBody(n, body.model, content, text), headers, call);
  }

  const server = http.createServer((req, res) => {
    const url = req.url ?? '/';
    const handle = async () => {
      if (req.method === 'POST' && url.endsWith('/chat/completions')) return completions(req, res);
      if (req.method === 'GET' && url.endsWith('/models')) {
        return sendJson(res, 200, { object: 'list', data: [{ id: 'sim-model', object: 'model', owned_by: 'combine-sim' }] });
      }
      if (url === '/_sim/stats') return sendJson(res, 200, { calls: calls.length, log: calls });
      if (req.method === 'POST' && url === '/_sim/faults') {
        rules = (JSON.parse(await readBody(req)) as FaultRule[]).map((r) => ({ ...r, used: 0 }));
        return sendJson(res, 200, { ok: true });
      }
      if (req.method === 'POST' && url === '/_sim/reset') {
        rules = [];
        calls.length = 0;
        return sendJson(res, 200, { ok: true });
      }
      sendJson(res, 404, { error: { message: `no route ${req.method} ${url}` } });
    };
    handle().catch((err) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: String(err) } });
    });
  });

  let connections = 0;
  server.on('connection', () => {
    connections++;
  });

  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    calls,
    get connections() {
      return connections;
    },
    setFaults(r) {
      rules = r.map((x) => ({ ...x, used: 0 }));
    },
    setLatency(ms) {
      latencyMs = ms;
    },
    release() {
      const n = held.size;
      for (const resolve of held) resolve();
      held.clear();
      return n;
    },
    setRateLimitHeaders(values) {
      rateLimitValues = values;
    },
    reset() {
      rules = [];
      calls.length = 0;
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
