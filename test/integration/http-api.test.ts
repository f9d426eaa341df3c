/**
 * The HTTP API with a plain HTTP client against the real daemon (started by the CLI with
 * `--http-port 0`), its SQLite file and the simulator: every endpoint gives the CLI's `--json` answer
 * and matches its documented schema; the token, Host and Origin rules; size limits; problem+json errors
 * with the CLI's codes; nothing stored on bad input; `/openapi.json` validates as OpenAPI 3.1.
 */
import { statSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiRoutes } from '../../src/daemon/http/api.js';
import { Harness, project, waitUntil, type ThreadJson } from '../helpers/harness.js';
import { httpRequest, startHttpDaemon, type HttpAnswer, type HttpDaemon } from '../helpers/http.js';
import { EXAMPLE_INPUT, installExampleOperation } from '../helpers/operations.js';

let h: Harness;
let api: HttpDaemon;
/** Every answer of the file: none may carry the API key or a CORS header. */
const answers: HttpAnswer[] = [];

const API_KEY = 'sk-test-SECRET-0123456789abcdef';

/** A request through the API that is also checked against the route's documented answer schema. */
async function call(method: string, path: string, o: Parameters<HttpDaemon['request']>[2] = {}): Promise<HttpAnswer> {
  const a = await api.request(method, path, o);
  answers.push(a);
  return a;
}

function routeOf(operationId: string) {
  const r = apiRoutes.find((x) => x.operationId === operationId);
  if (!r) throw new Error(`no route ${operationId}`);
  return r;
}

/** Expects the route's success status and a body its response schema accepts; returns the body. */
function ok(a: HttpAnswer, operationId: string): any {
  const r = routeOf(operationId);
  if (a.status !== r.status) throw new Error(`${operationId}: HTTP ${a.status} ${a.text}`);
  expect(a.headers['content-type']).toMatch(/^application\/json/);
  r.response.parse(a.json);
  return a.json;
}

function expectProblem(a: HttpAnswer, status: number, code: string): any {
  expect(a.status, a.text).toBe(status);
  expect(a.headers['content-type']).toBe('application/problem+json');
  expect(a.json).toMatchObject({ type: 'about:blank', status, code });
  expect(typeof a.json.title).toBe('string');
  expect(typeof a.json.detail).toBe('string');
  return a.json;
}

async function threadCount(): Promise<number> {
  return (await h.queryOne<{ n: number }>('SELECT count(*) AS n FROM llm_threads'))!.n;
}

async function finished(threadId: string): Promise<ThreadJson> {
  return waitUntil(async () => {
    const t = (await call('GET', `/threads/${threadId}`)).json as ThreadJson;
    return ['complete', 'failed', 'canceled'].includes(t.status) ? t : null;
  }, `thread ${threadId} to end`);
}

beforeAll(async () => {
  h = await Harness.start();
  installExampleOperation(h.home); // an operation of the user's own, for POST /commands/run/{operation}
  // Room for the small project's work, not for the big one's generate-all (QUEUE_FULL).
  api = await startHttpDaemon(h, { COMBINE_MAX_QUEUED: '20' });
  await h.importProject(project('acme', 5));
  await h.importProject(project('big', 30));
});

afterAll(async () => {
  for (const a of answers) {
    expect(a.text).not.toContain(API_KEY);
    expect(Object.keys(a.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
  }
  await h?.cleanup();
});

describe('HTTP API: security', () => {
  it('keeps the token in COMBINE_HOME/http.token, mode 0600', () => {
    expect(statSync(join(h.home, 'http.token')).mode & 0o777).toBe(0o600);
    expect(api.token.length).toBeGreaterThanOrEqual(32);
  });

  it('answers 401 without the token, with a wrong one, or with the token in the URL of an API call', async () => {
    for (const o of [{ token: null }, { token: 'wrong-token-wrong-token-wrong-token' }, { token: null, headers: { cookie: 'combine_token=nope' } }]) {
      const a = await call('GET', '/projects', o);
      expectProblem(a, 401, 'UNAUTHORIZED');
      expect(a.headers['www-authenticate']).toMatch(/^Bearer/);
    }
    expectProblem(await call('GET', `/projects?token=${api.token}`, { token: null }), 401, 'UNAUTHORIZED');
    expectProblem(
      await call('POST', '/commands/story-backlog/generate-epic', { token: null, body: { project_id: 'acme', epic_id: 'E1' } }),
      401,
      'UNAUTHORIZED',
    );
    ok(await call('GET', '/projects', { token: null, headers: { cookie: `other=1; combine_token=${encodeURIComponent(api.token)}` } }), 'listProjects');
  });

  it('refuses a Host that is not this server (DNS rebinding) with 403', async () => {
    expectProblem(await call('GET', '/projects', { headers: { host: 'evil.example' } }), 403, 'FORBIDDEN');
    expectProblem(await call('GET', '/projects', { headers: { host: `evil.example:${api.port}` } }), 403, 'FORBIDDEN');
    expectProblem(await call('GET', '/projects', { headers: { host: `127.0.0.1:${api.port + 1}` } }), 403, 'FORBIDDEN');
    const before = await threadCount();
    expectProblem(
      await call('POST', '/commands/story-backlog/generate-epic', { headers: { host: 'evil.example' }, body: { project_id: 'acme', epic_id: 'E1' } }),
      403,
      'FORBIDDEN',
    );
    expect(await threadCount()).toBe(before);
    ok(await call('GET', '/projects', { headers: { host: `localhost:${api.port}` } }), 'listProjects');
  });

  it('refuses a state-changing request from another origin (CSRF) with 403, and stores nothing', async () => {
    const before = await threadCount();
    for (const origin of ['http://evil.example', 'null', `http://127.0.0.1:${api.port + 1}`]) {
      expectProblem(
        await call('POST', '/commands/story-backlog/generate-epic', { headers: { origin }, body: { project_id: 'acme', epic_id: 'E1' } }),
        403,
        'FORBIDDEN',
      );
    }
    expect(await threadCount()).toBe(before);
    // A read from elsewhere is answered, but without any CORS header no other origin's script can read it.
    ok(await call('GET', '/projects', { headers: { origin: 'http://evil.example' } }), 'listProjects');
    const preflight = await call('OPTIONS', '/commands/story-backlog/generate-epic', {
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBeGreaterThanOrEqual(400);
  });

  it('trades the token in a page URL for an HttpOnly, SameSite=Strict cookie and drops it from the address', async () => {
    const page = await call('GET', `/?token=${encodeURIComponent(api.token)}`, { token: null, headers: { accept: 'text/html' } });
    expect(page.status).toBe(303);
    expect(page.headers.location).toBe('/');
    const cookie = String(page.headers['set-cookie']);
    expect(cookie).toMatch(/^combine_token=[^;]+; HttpOnly; SameSite=Strict; Path=\//);
    const wrong = await call('GET', '/?token=not-the-token', { token: null, headers: { accept: 'text/html' } });
    expect(wrong.status).toBe(401);
    expect(wrong.headers['content-type']).toMatch(/^text\/html/);
    expect(wrong.text).toContain('combine ui');
    const home = await call('GET', '/', { token: null, headers: { accept: 'text/html', cookie: cookie.split(';')[0]! } });
    expect(home.status).toBe(200);
    expect(home.headers['content-security-policy']).toContain("script-src 'self'");
    expect(home.text).toContain('Project acme');
  });
});

describe('HTTP API: bad input stores nothing', () => {
  it('answers 413 for a body over 1 MiB', async () => {
    const before = await threadCount();
    const huge = { project_id: 'acme', epic_id: 'E1', padding: 'x'.repeat(2 * 1024 * 1024) };
    expectProblem(await call('POST', '/commands/story-backlog/generate-epic', { body: huge }), 413, 'PAYLOAD_TOO_LARGE');
    // Also when the client does not announce the size (chunked).
    const chunked = await httpRequest(
      api.port,
      'POST',
      '/commands/story-backlog/generate-epic',
      { authorization: `Bearer ${api.token}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      Buffer.from(JSON.stringify(huge)),
    );
    expectProblem(chunked, 413, 'PAYLOAD_TOO_LARGE');
    expect(await threadCount()).toBe(before);
  });

  it('a client still writing its oversized body reads the 413 once it has sent it, not a reset', async () => {
    // A client that writes the whole body before it reads (most do, and a loaded one does so by accident):
    // answered and closed at once, its unread bytes reset the connection and it never sees the 413.
    const sock = net.connect(api.port, '127.0.0.1');
    sock.on('error', () => {}); // a write's failure is read from its callback
    await new Promise((resolve) => sock.once('connect', resolve));
    sock.pause();
    const size = 16 * 2 ** 20;
    const head = `POST /commands/story-backlog/generate-epic HTTP/1.1\r\nHost: 127.0.0.1:${api.port}\r\nAuthorization: Bearer ${api.token}\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`;
    const write = (b: Buffer | string) => new Promise<Error | null>((resolve) => sock.write(b, (err) => resolve(err ?? null)));
    let failed: Error | null = await write(head);
    const chunk = Buffer.alloc(2 ** 16, 0x20);
    for (let sent = 0; sent < size && !failed; sent += chunk.length) failed = await write(chunk);
    let answer = '';
    sock.on('data', (d) => (answer += d));
    const closed = new Promise((resolve) => sock.once('close', resolve));
    sock.resume();
    await Promise.race([closed, waitUntil(() => answer.includes('PAYLOAD_TOO_LARGE'), 'the answer')]);
    sock.destroy();
    expect(failed?.message ?? null, 'the server reset the connection while the body was being sent').toBeNull();
    expect(answer).toMatch(/^HTTP\/1.1 413/);
    expect(answer).toContain('PAYLOAD_TOO_LARGE');
  });

  it('answers 400 naming the field for a wrong type, a missing field or an unknown one', async () => {
    const before = await threadCount();
    const wrongType = expectProblem(
      await call('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'acme', epic_id: 7 } }),
      400,
      'BAD_REQUEST',
    );
    expect(wrongType.errors).toEqual([{ field: 'epic_id', message: expect.stringContaining('expected string') }]);
    expect(wrongType.detail).toContain('epic_id');
    const missing = expectProblem(await call('POST', '/commands/story-backlog/generate-all', { body: {} }), 400, 'BAD_REQUEST');
    expect(missing.errors.map((e: { field: string }) => e.field)).toEqual(['project_id']);
    const unknown = expectProblem(
      await call('POST', '/commands/story-backlog/generate-all', { body: { project_id: 'acme', forse: true } }),
      400,
      'BAD_REQUEST',
    );
    expect(unknown.errors).toEqual([{ field: 'forse', message: 'unknown field' }]);
    const force = expectProblem(await call('POST', '/commands/story-backlog/generate-all', { body: { project_id: 'acme', force: 'yes' } }), 400, 'BAD_REQUEST');
    expect(force.errors[0].field).toBe('force');
    expectProblem(
      await call('POST', '/commands/story-backlog/generate-all', { raw: '{"project_id":', headers: { 'content-type': 'application/json' } }),
      400,
      'BAD_REQUEST',
    );
    expectProblem(
      await call('POST', '/commands/story-backlog/generate-all', { raw: 'project_id=acme', headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    expect(await threadCount()).toBe(before);
    const limit = expectProblem(await call('GET', '/threads?limit=0'), 400, 'BAD_REQUEST');
    expect(limit.errors[0].field).toBe('limit');
    const status = expectProblem(await call('GET', '/projects/acme/threads?status=done'), 400, 'BAD_REQUEST');
    expect(status.errors[0]).toEqual({ field: 'status', message: expect.stringContaining('"done" is not a thread status') });
    expectProblem(await call('GET', '/threads?active=true&active=false'), 400, 'BAD_REQUEST');
  });

  it('answers 503 QUEUE_FULL (with Retry-After) when the queue has no room, and stores nothing', async () => {
    const before = await threadCount();
    const a = await call('POST', '/commands/story-backlog/generate-all', { body: { project_id: 'big' } });
    expectProblem(a, 503, 'QUEUE_FULL');
    expect(Number(a.headers['retry-after'])).toBeGreaterThan(0);
    expect(await threadCount()).toBe(before);
  });

  it('answers 404 for an unknown resource or endpoint, 405 for a wrong method', async () => {
    expectProblem(await call('GET', '/threads/no-such-thread'), 404, 'NOT_FOUND');
    expectProblem(await call('GET', '/threads/no-such-thread/ledger'), 404, 'NOT_FOUND');
    expectProblem(await call('GET', '/projects/nope'), 404, 'NOT_FOUND');
    expectProblem(await call('GET', '/projects/nope/threads?active=true'), 404, 'NOT_FOUND');
    expectProblem(await call('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'acme', epic_id: 'E99' } }), 404, 'NOT_FOUND');
    expectProblem(await call('GET', '/no/such/endpoint'), 404, 'NOT_FOUND');
    const method = expectProblem(await call('DELETE', '/threads/x'), 405, 'METHOD_NOT_ALLOWED');
    expect(method.detail).toContain('GET');
  });
});

describe('HTTP API: the endpoints give the CLI --json answers', () => {
  let epicThread: string;

  it('POST generate-epic: 202 with Location, idempotent (one thread, one paid call for two concurrent requests)', async () => {
    const [a, b] = await Promise.all([
      call('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'acme', epic_id: 'E1' } }),
      call('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'acme', epic_id: 'E1' } }),
    ]);
    const first = ok(a, 'generateEpic');
    const second = ok(b, 'generateEpic');
    expect(second.thread_id).toBe(first.thread_id);
    expect([first.deduplicated, second.deduplicated].sort()).toEqual([false, true]);
    expect(a.headers.location).toBe(`/threads/${first.thread_id}`);
    epicThread = first.thread_id;
    expect((await finished(epicThread)).status).toBe('complete');
    expect(h.sim.calls.filter((c) => c.epic_id === 'E1')).toHaveLength(1);
    // Done: asking again is a no-op answering the completed thread, as the CLI does.
    const again = ok(await call('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'acme', epic_id: 'E1' } }), 'generateEpic');
    expect(again).toEqual({ thread_id: epicThread, status: 'complete', deduplicated: true });
    expect(await h.json(['generate-epic', '--project', 'acme', '--epic', 'E1'])).toEqual(again);
  });

  it('GET /threads/{id} and its ledger equal `thread --json` and `ledger --json`', async () => {
    const t = ok(await call('GET', `/threads/${epicThread}`), 'getThread');
    expect(t).toEqual(await h.json(['thread', epicThread]));
    expect(Object.keys(t).sort()).toEqual(
      [
        'child_summary',
        'closed_at',
        'created_at',
        'hold',
        'in_doubt',
        'kind',
        'parent_thread_id',
        'status',
        'target_ref',
        'thread_id',
        'usage',
        'traceparent',
        'models',
        'escalated',
        'escalation',
      ].sort(),
    );
    const ledger = ok(await call('GET', `/threads/${epicThread}/ledger`), 'getThreadLedger');
    expect(ledger).toEqual(await h.json(['ledger', epicThread]));
    expect(ledger.map((e: { entry_type: string }) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);
    expect(ledger[1]).toHaveProperty('cost_usd');
    expect(ledger.every((e: { hash: string }) => /^[0-9a-f]{64}$/.test(e.hash))).toBe(true);
  });

  it('POST generate-all: 202, and the project lists its threads (?active=true, ?status=, ?limit=) as `threads --json`', async () => {
    // force: E1 was generated above; without it, that epic's complete thread would be reused, not run again.
    const r = ok(await call('POST', '/commands/story-backlog/generate-all', { body: { project_id: 'acme', force: true } }), 'generateAll');
    expect(r.deduplicated).toBe(false);
    const active = ok(await call('GET', '/projects/acme/threads?active=true'), 'listProjectThreads');
    expect(active.map((t: ThreadJson) => t.thread_id)).toContain(r.thread_id);
    expect(active.every((t: ThreadJson) => t.status === 'open' || t.status === 'running')).toBe(true);
    const parent = await finished(r.thread_id);
    expect(parent.child_summary).toEqual({ complete: 5 });
    expect(ok(await call('GET', '/projects/acme/threads?active=true'), 'listProjectThreads')).toEqual([]);
    expect(ok(await call('GET', '/projects/acme/threads'), 'listProjectThreads')).toEqual(await h.json(['threads', '--project', 'acme']));
    const two = ok(await call('GET', '/projects/acme/threads?status=complete&limit=2'), 'listProjectThreads');
    expect(two).toHaveLength(2);
    const children = ok(await call('GET', `/threads?parent_thread_id=${r.thread_id}`), 'listThreads');
    expect(children).toHaveLength(5);
    expect(children.every((t: ThreadJson) => t.parent_thread_id === r.thread_id)).toBe(true);
    const byKind = ok(await call('GET', `/threads?kind=${parent.kind}&project_id=acme`), 'listThreads');
    expect(byKind.map((t: ThreadJson) => t.thread_id)).toEqual([r.thread_id]);
  });

  it('GET /threads pages by cursor, with a Link to the next page, and loses or repeats nothing', async () => {
    const all = ok(await call('GET', '/threads?limit=1000'), 'listThreads') as ThreadJson[];
    expect(all.length).toBeGreaterThanOrEqual(7);
    const seen: string[] = [];
    let path: string | null = '/threads?limit=3';
    while (path) {
      const page = await call('GET', path);
      seen.push(...ok(page, 'listThreads').map((t: ThreadJson) => t.thread_id));
      path = /<([^>]+)>; rel="next"/.exec(String(page.headers.link ?? ''))?.[1] ?? null;
    }
    expect(seen).toEqual(all.map((t) => t.thread_id));
    expectProblem(await call('GET', '/threads?cursor=no-such-thread'), 400, 'BAD_REQUEST');
  });

  it('POST retry on a failed thread, POST cancel on a running one (and 409 when a thread cannot be)', async () => {
    h.setFaults([
      { kind: 'auth', match: 'Epic id: E3', times: 1 },
      { kind: 'hang', match: 'Epic id: E4' },
    ]);
    const failedId = ok(
      await call('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'acme', epic_id: 'E3', force: true } }),
      'generateEpic',
    ).thread_id;
    expect((await finished(failedId)).status).toBe('failed');
    const retried = ok(await call('POST', `/threads/${failedId}/retry`), 'retryThread');
    expect(retried.thread_id).toBe(failedId);
    expect(['open', 'running']).toContain(retried.status);
    expect((await finished(failedId)).status).toBe('complete');
    expectProblem(await call('POST', `/threads/${failedId}/retry`), 409, 'CONFLICT');

    const hanging = ok(
      await call('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'acme', epic_id: 'E4', force: true } }),
      'generateEpic',
    ).thread_id;
    await waitUntil(() => h.sim.calls.some((c) => c.epic_id === 'E4' && c.fault === 'hang'), 'the E4 call to be in flight');
    const canceled = ok(await call('POST', `/threads/${hanging}/cancel`, { body: {} }), 'cancelThread');
    expect(canceled).toMatchObject({ thread_id: hanging, status: 'canceled' });
    // The canceled call was in flight: its reservation settles just after the cancel answers. Compare the
    // two views of the thread once it has, as a user reading it a moment later would see it.
    await waitUntil(async () => (await h.json<ThreadJson>(['thread', hanging])).usage.reserved_calls === 0, 'the canceled call to settle');
    expect(ok(await call('GET', `/threads/${hanging}`), 'getThread')).toEqual(await h.json(['thread', hanging]));
    expect(ok(await call('POST', `/threads/${hanging}/cancel`), 'cancelThread').status).toBe('canceled'); // idempotent
    expectProblem(await call('POST', `/threads/${failedId}/cancel`), 409, 'CONFLICT'); // complete: too late
    expectProblem(await call('POST', '/threads/no-such-thread/cancel'), 404, 'NOT_FOUND');
    const body = expectProblem(await call('POST', `/threads/${hanging}/retry`, { body: { now: true } }), 400, 'BAD_REQUEST');
    expect(body.errors).toEqual([{ field: 'now', message: 'unknown field' }]);
    h.setFaults([]);
  });

  it('GET /projects, /projects/{id} and documents equal `project list/show --json`', async () => {
    expect(ok(await call('GET', '/projects'), 'listProjects')).toEqual(await h.json(['project', 'list']));
    expect(ok(await call('GET', '/projects/acme'), 'getProject')).toEqual(await h.json(['project', 'show', 'acme']));
    const doc = ok(await call('GET', '/projects/acme/documents/story_backlog'), 'getDocument');
    expect(doc).toMatchObject({ project_id: 'acme', doc_type: 'story_backlog', key: null });
    const backlog = await h.json(['backlog', 'acme']);
    expect(doc.version).toBe(backlog.version);
    expect(doc.content.epics.map((e: { epic_id: string }) => e.epic_id).sort()).toEqual(['E1', 'E2', 'E3', 'E4', 'E5']);
    expect(ok(await call('GET', '/projects/acme/documents/epic_architecture'), 'getDocument').content.epics).toHaveLength(5);
    expectProblem(await call('GET', '/projects/acme/documents/nothing_like_this'), 404, 'NOT_FOUND');
    expectProblem(await call('GET', '/projects/acme/documents/story_backlog?key=2020-01-01'), 404, 'NOT_FOUND');
  });

  it('GET /schedules, their runs and a keyed document (a briefing) equal the CLI', async () => {
    const s = await h.json(['schedule', 'add', '--project', 'acme', '--operation', 'briefing', '--cron', '* * * * * *']);
    await waitUntil(async () => {
      const runs = ok(await call('GET', `/schedules/${s.schedule_id}/runs`), 'listScheduleRuns');
      return runs.find((r: { status: string }) => r.status !== 'pending');
    }, 'a finished briefing run');
    await h.json(['schedule', 'pause', s.schedule_id]);
    await waitUntil(async () => (await h.json<any[]>(['schedule', 'runs', s.schedule_id])).every((r) => r.status !== 'pending'), 'no pending run');
    expect(ok(await call('GET', '/schedules'), 'listSchedules')).toEqual(await h.json(['schedule', 'list']));
    expect(ok(await call('GET', `/schedules/${s.schedule_id}/runs?limit=50`), 'listScheduleRuns')).toEqual(await h.json(['schedule', 'runs', s.schedule_id]));
    const briefing = await h.json(['briefing', 'acme']);
    const doc = ok(await call('GET', `/projects/acme/documents/briefing?key=${briefing.date}`), 'getDocument');
    expect(doc).toMatchObject({ doc_type: 'briefing', key: briefing.date, version: briefing.version });
    expectProblem(await call('GET', '/schedules/no-such-schedule/runs'), 404, 'NOT_FOUND');
  });

  it('GET /usage and /health equal `usage --json` and `health --json`', async () => {
    expect(ok(await call('GET', '/usage'), 'getUsage')).toEqual(await h.json(['usage']));
    expect(ok(await call('GET', '/usage?project_id=acme'), 'getUsage')).toEqual(await h.json(['usage', '--project', 'acme']));
    const health = ok(await call('GET', '/health'), 'getHealth');
    // Free disk space is sampled as other processes write: equal in shape, not in the byte.
    const sampled = (x: any) => ({ ...x, storage: { ...x.storage, free_bytes: typeof x.storage.free_bytes } });
    expect(sampled(health)).toEqual(sampled(await h.json(['health'])));
    expect(health.ready).toBe(true);
  });
});

describe('HTTP API: POST /commands/run/{operation} runs any operation, as `combine run` does', () => {
  const RUN = '/commands/run/release_notes';
  const releaseCalls = () => h.sim.calls.filter((c) => c.operation === 'release_notes');
  const releaseNotes = (key: string) => `/projects/acme/documents/release_notes?key=${key}`;

  it('202 with Location; the same input → the same thread (deduplicated, one paid call); force runs again', async () => {
    const [a, b] = await Promise.all([call('POST', RUN, { body: { input: EXAMPLE_INPUT } }), call('POST', RUN, { body: { input: EXAMPLE_INPUT } })]);
    const first = ok(a, 'runOperation');
    const second = ok(b, 'runOperation');
    expect(second.thread_id).toBe(first.thread_id);
    expect([first.deduplicated, second.deduplicated].sort()).toEqual([false, true]);
    expect(a.headers.location).toBe(`/threads/${first.thread_id}`);
    const done = await finished(first.thread_id);
    expect(done).toMatchObject({ kind: 'release_notes', status: 'complete', target_ref: { doc_type: 'release_notes', project_id: 'acme', key: '1.2.0' } });
    expect(releaseCalls()).toHaveLength(1);

    const again = ok(await call('POST', RUN, { body: { input: EXAMPLE_INPUT } }), 'runOperation');
    expect(again).toEqual({ thread_id: first.thread_id, status: 'complete', deduplicated: true });
    // The same service as the CLI: `combine run` answers the same thread, and neither paid again.
    expect(await h.json(['run', 'release_notes', '--input', JSON.stringify(EXAMPLE_INPUT)])).toEqual(again);
    expect(releaseCalls()).toHaveLength(1);
    const doc = ok(await call('GET', releaseNotes('1.2.0')), 'getDocument');
    expect(doc).toMatchObject({
      project_id: 'acme',
      doc_type: 'release_notes',
      key: '1.2.0',
      version: 1,
      content: { version: '1.2.0', changes: EXAMPLE_INPUT.changes },
    });

    const forced = ok(await call('POST', RUN, { body: { input: EXAMPLE_INPUT, force: true } }), 'runOperation');
    expect(forced).toMatchObject({ deduplicated: false });
    expect(forced.thread_id).not.toBe(first.thread_id);
    expect((await finished(forced.thread_id)).status).toBe('complete');
    expect(releaseCalls()).toHaveLength(2);
    const rewritten = ok(await call('GET', releaseNotes('1.2.0')), 'getDocument');
    expect(rewritten.version).toBe(2);
    expect(rewritten).toEqual(await h.json(['doc', 'acme', 'release_notes', '--key', '1.2.0']));
    const docs = ok(await call('GET', '/projects/acme/documents'), 'listDocuments');
    expect(docs).toContainEqual({ project_id: 'acme', doc_type: 'release_notes', key: '1.2.0', version: 2, updated_at: rewritten.updated_at });
    expect(docs.map((d: { doc_type: string }) => d.doc_type)).toEqual(expect.arrayContaining(['epic_architecture', 'story_backlog']));
  });

  it("400 naming the field for input the operation's schema refuses (as `combine run` reports it), 404 for an unknown operation or project; nothing stored", async () => {
    const before = await threadCount();
    const calls = releaseCalls().length;
    const cases: [unknown, { field: string; message: string }[]][] = [
      [{ input: { ...EXAMPLE_INPUT, changes: [] } }, [{ field: 'input.changes', message: 'must NOT have fewer than 1 items' }]],
      [{ input: { project_id: 'acme', version: '1.2.0' } }, [{ field: 'input.changes', message: 'is required' }]],
      [{ input: { ...EXAMPLE_INPUT, extra: 1 } }, [{ field: 'input.extra', message: 'is not allowed' }]],
      [{ input: { ...EXAMPLE_INPUT, version: 'not a version!' } }, [{ field: 'input.version', message: expect.stringContaining('must match pattern') }]],
      [{ input: { ...EXAMPLE_INPUT, changes: 'one change' } }, [{ field: 'input.changes', message: 'must be array' }]],
      [{}, [{ field: 'input', message: expect.any(String) }]],
      [{ input: 'acme' }, [{ field: 'input', message: expect.any(String) }]],
      [{ input: EXAMPLE_INPUT, forse: true }, [{ field: 'forse', message: 'unknown field' }]],
    ];
    for (const [body, errors] of cases) {
      const p = expectProblem(await call('POST', RUN, { body }), 400, 'BAD_REQUEST');
      expect(p.errors, JSON.stringify(body)).toEqual(errors);
      for (const e of errors) expect(p.detail).toContain(e.field);
    }
    // The daemon's words are the CLI's: the same lines, field by field.
    const bad = { ...EXAMPLE_INPUT, changes: [], extra: 1 };
    const p = expectProblem(await call('POST', RUN, { body: { input: bad } }), 400, 'BAD_REQUEST');
    expect(p.errors.map((e: { field: string }) => e.field).sort()).toEqual(['input.changes', 'input.extra']);
    const cli = await h.cli(['run', 'release_notes', '--input', JSON.stringify(bad)]);
    expect(cli.code).toBe(2);
    for (const e of p.errors) expect(cli.stderr).toContain(`${e.field}: ${e.message}`);

    const unknown = expectProblem(await call('POST', '/commands/run/no_such_operation', { body: { input: {} } }), 404, 'NOT_FOUND');
    expect(unknown.detail).toContain('no operation "no_such_operation"');
    expectProblem(await call('POST', RUN, { body: { input: { ...EXAMPLE_INPUT, project_id: 'nope' } } }), 404, 'NOT_FOUND');
    expectProblem(await call('GET', '/operations/no_such_operation'), 404, 'NOT_FOUND');
    expectProblem(await call('GET', '/projects/nope/documents'), 404, 'NOT_FOUND');
    expect(await threadCount()).toBe(before);
    expect(releaseCalls()).toHaveLength(calls);
  });

  it('503 QUEUE_FULL for a run the queue has no room for (a built-in orchestration), nothing stored', async () => {
    const before = await threadCount();
    const a = await call('POST', '/commands/run/story_generate_all', { body: { input: { project_id: 'big' } } });
    expectProblem(a, 503, 'QUEUE_FULL');
    expect(Number(a.headers['retry-after'])).toBeGreaterThan(0);
    expect(await threadCount()).toBe(before);
  });

  it('GET /operations and /operations/{operation} equal `operations --json` and `operations show --json`', async () => {
    const list = ok(await call('GET', '/operations'), 'listOperations');
    expect(list).toEqual(await h.json(['operations']));
    expect(list.find((o: { name: string }) => o.name === 'release_notes')).toMatchObject({ source: join(h.home, 'operations', 'release_notes.mjs') });
    const one = ok(await call('GET', '/operations/release_notes'), 'getOperation');
    expect(one).toEqual(await h.json(['operations', 'show', 'release_notes']));
    expect(one.input.required).toEqual(['project_id', 'version', 'changes']);
  });
});

describe('/openapi.json', () => {
  it('validates as OpenAPI 3.1 and lists every endpoint', async () => {
    const doc = (await call('GET', '/openapi.json')).json;
    const validator = new Validator();
    expect(await validator.validate(structuredClone(doc))).toEqual({ valid: true });
    expect(validator.version).toBe('3.1');
    const listed = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(listed.sort()).toEqual(apiRoutes.map((r) => `${r.method} ${r.path}`).sort());
    for (const endpoint of [
      'POST /commands/story-backlog/generate-epic',
      'POST /commands/story-backlog/generate-all',
      'GET /threads/{thread_id}',
      'GET /threads/{thread_id}/ledger',
      'GET /projects/{project_id}/threads',
      'GET /projects',
      'GET /projects/{project_id}',
      'GET /projects/{project_id}/documents/{doc_type}',
      'POST /threads/{thread_id}/retry',
      'POST /threads/{thread_id}/cancel',
      'GET /usage',
      'GET /health',
      'POST /commands/run/{operation}',
      'GET /operations',
      'GET /operations/{operation}',
    ]) {
      expect(listed).toContain(endpoint);
    }
    // The run endpoint: the loaded operations by name, and each one's own input schema as a component.
    const run = doc.paths['/commands/run/{operation}'].post;
    expect(run.parameters.find((p: { name: string }) => p.name === 'operation').schema.enum).toEqual(
      (await h.json<{ name: string }[]>(['operations'])).map((o) => o.name),
    );
    const runBody = run.requestBody.content['application/json'].schema;
    expect(runBody).toMatchObject({ required: ['input'], additionalProperties: false, properties: { force: { type: 'boolean' } } });
    expect(runBody.properties.input.anyOf).toContainEqual({ $ref: '#/components/schemas/OperationInput.release_notes' });
    const { title, description, ...inputSchema } = doc.components.schemas['OperationInput.release_notes'];
    expect({ title, description }).toEqual({ title: 'release_notes', description: expect.stringContaining('release notes') });
    expect(inputSchema).toEqual((await call('GET', '/operations/release_notes')).json.input);
    expect(run.responses['202'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/CommandResult' });
    for (const status of ['400', '404', '503']) expect(run.responses[status]).toBeDefined();
    // The request schemas are the validating ones: the body of generate-epic names its fields and limits.
    const body = doc.paths['/commands/story-backlog/generate-epic'].post.requestBody.content['application/json'].schema;
    expect(body).toMatchObject({
      required: ['project_id', 'epic_id'],
      additionalProperties: false,
      properties: { epic_id: { type: 'string', maxLength: 200 } },
    });
    expect(doc.components.schemas.Thread.properties.child_summary).toBeDefined();
    // The validator does reject a broken document (so the check above can fail).
    const broken = structuredClone(doc);
    broken.paths['/threads/{thread_id}'].get.parameters[0].in = 'nowhere';
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });
});
