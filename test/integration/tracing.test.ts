/**
 * Trace ids (issue 16, item 4): every command gets a W3C trace context — the caller's when it passes
 * one (`--traceparent`, TRACEPARENT, the HTTP `traceparent` header) — stored on the thread, carried on
 * the log lines of its work, sent to the provider as a `traceparent` header and shown by `thread`.
 * With `otel.endpoint` set, spans go over OTLP/HTTP to a collector (here: a plain HTTP server).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitUntil, type CommandJson } from '../helpers/harness.js';
import { startHttpDaemon } from '../helpers/http.js';

let h: Harness;
let collector: Collector | undefined;
afterEach(async () => {
  await h?.cleanup();
  await collector?.close();
  collector = undefined;
});

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER = `00-${TRACE}-00f067aa0ba902b7-01`;
const traceOf = (traceparent: string | null | undefined) => traceparent?.split('-')[1];

async function setup(extra: Record<string, unknown> = {}) {
  h = await Harness.start();
  h.writeConfig({ ...FAST_RETRY, ...extra });
  await h.importProject(project('p', 3));
}

/** The log lines (JSON) that name this thread. */
function logLinesOf(threadId: string): Record<string, unknown>[] {
  return h
    .logText()
    .split('\n')
    .filter((l) => l.includes(threadId))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('trace ids', () => {
  it('continues the caller’s trace: stored on the thread, on every log line of its work, in the provider’s traceparent header, shown by thread', async () => {
    await setup();
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1', '--traceparent', CALLER]);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');

    const t = await h.json<any>(['thread', r.thread_id]);
    expect(traceOf(t.traceparent)).toBe(TRACE);
    expect(t.traceparent).not.toBe(CALLER); // the command's own span, a child of the caller's
    const call = h.sim.calls.find((c) => c.epic_id === 'E1')!;
    expect(traceOf(call.traceparent)).toBe(TRACE);
    expect(call.traceparent).not.toBe(t.traceparent); // the call is its own span in that trace
    expect((await h.cli(['thread', r.thread_id])).stdout).toMatch(new RegExp(`trace\\s+${TRACE}`));

    const lines = logLinesOf(r.thread_id);
    expect(lines.length).toBeGreaterThan(2);
    expect(lines.every((l) => l.trace_id === TRACE)).toBe(true);
  });

  it('starts a new trace without one; TRACEPARENT is read from the environment; a bad value is refused with exit 2 and nothing stored', async () => {
    await setup();
    const fresh = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    await h.waitForEnd(fresh.thread_id);
    const t = await h.json<any>(['thread', fresh.thread_id]);
    expect(t.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(traceOf(h.sim.calls.find((c) => c.epic_id === 'E1')!.traceparent)).toBe(traceOf(t.traceparent));

    const fromEnv = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E2'], { env: { TRACEPARENT: CALLER } });
    expect(traceOf((await h.json<any>(['thread', fromEnv.thread_id])).traceparent)).toBe(TRACE);

    const bad = await h.cli(['generate-epic', '--project', 'p', '--epic', 'E3', '--traceparent', 'not-a-trace']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--traceparent: "not-a-trace" is not a W3C traceparent');
    expect((await h.json<any[]>(['threads'])).some((x) => x.target_ref.epic_id === 'E3')).toBe(false);
  });

  it('takes the HTTP API’s traceparent header; an orchestration’s children share its trace', async () => {
    await setup();
    const api = await startHttpDaemon(h);
    const a = await api.request('POST', '/commands/story-backlog/generate-all', { body: { project_id: 'p' }, headers: { traceparent: CALLER } });
    expect(a.status).toBe(202);
    await h.waitForEnd(a.json.thread_id);
    const parent = await api.request('GET', `/threads/${a.json.thread_id}`);
    expect(traceOf(parent.json.traceparent)).toBe(TRACE);
    const children = await h.json<any[]>(['threads', '--parent', a.json.thread_id]);
    expect(children).toHaveLength(3);
    for (const c of children) expect(traceOf((await h.json<any>(['thread', c.thread_id])).traceparent)).toBe(TRACE);
    expect(h.sim.calls.map((c) => traceOf(c.traceparent))).toEqual([TRACE, TRACE, TRACE]);
  });

  it('exports command → claim → call → apply spans of one trace over OTLP/HTTP when otel.endpoint is set', async () => {
    collector = await startCollector();
    await setup({ otel: { endpoint: collector.url, service_name: 'combine-test' } });
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1', '--traceparent', CALLER]);
    await h.waitForEnd(r.thread_id);
    const spans = await waitUntil(() => {
      const names = new Set(collector!.spans.filter((s) => s.traceId === TRACE).map((s) => s.name));
      return ['command story_generate_epic', 'claim', 'call', 'apply'].every((n) => names.has(n)) ? collector!.spans : null;
    }, 'the four spans at the collector');
    expect(collector.services).toContain('combine-test');
    const byName = new Map(spans.filter((s) => s.traceId === TRACE).map((s) => [s.name, s]));
    const command = byName.get('command story_generate_epic')!;
    expect(command.parentSpanId).toBe('00f067aa0ba902b7'); // the caller's span
    for (const n of ['claim', 'call', 'apply']) expect(byName.get(n)!.parentSpanId).toBe(command.spanId);
    // The call span is the one whose id the provider got.
    expect(h.sim.calls[0]!.traceparent).toBe(`00-${TRACE}-${byName.get('call')!.spanId}-01`);
    const attrs = Object.fromEntries(byName.get('call')!.attributes.map((a) => [a.key, a.value.stringValue ?? a.value.intValue]));
    expect(attrs).toMatchObject({ 'gen_ai.request.model': 'test-model', 'combine.model.logical': 'default', 'combine.thread_id': r.thread_id });
  });
});

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: { key: string; value: { stringValue?: string; intValue?: string } }[];
}

interface Collector {
  url: string;
  spans: OtlpSpan[];
  services: string[];
  close(): Promise<void>;
}

/** An OTLP/HTTP JSON receiver: what a collector gets on POST /v1/traces. */
async function startCollector(): Promise<Collector> {
  const spans: OtlpSpan[] = [];
  const services: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans: any[] };
        for (const rs of body.resourceSpans) {
          const service = rs.resource?.attributes?.find((a: any) => a.key === 'service.name')?.value?.stringValue;
          if (service) services.push(service);
          for (const ss of rs.scopeSpans) spans.push(...ss.spans);
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    services,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
