/**
 * Target 7: the HTTP API and dashboard at 1,000,000 closed threads (the database of target 5, built
 * the same way) against an empty one. In process: the real App and HTTP server on 127.0.0.1, a
 * keep-alive client sending one request at a time (so each figure is one request's latency, client
 * included). Per run and database, QUERIES requests of each kind:
 * - `GET /threads?limit=50`: the first page of the threads list (JSON);
 * - `GET /threads?limit=50&cursor=<random thread>`: a page anywhere in the history (keyset paging);
 * - `GET /threads` as the dashboard's HTML page (50 rows);
 * - `GET /threads/{id}` for a random closed thread.
 * The empty database holds the same 1,000 threads as the first page needs, so pages are full in both.
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { App } from '../../src/daemon/app.js';
import { startHttpServer, type HttpServer } from '../../src/daemon/http/server.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { createDashboard } from '../../src/web/dashboard.js';
import { quantile, row, type Row } from '../lib/stats.js';
import { appFor, fillClosedThreads } from './scale.js';

const CLOSED_THREADS = Number(process.env.BENCH_SCALE_THREADS ?? 1_000_000);
const SMALL = 1000;
const QUERIES = 300;
const P95_GOAL_MS = 20;

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function get(port: number, path: string, token: string, accept = 'application/json'): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, agent, headers: { authorization: `Bearer ${token}`, accept } }, (res) => {
      let n = 0;
      res.on('data', (c: Buffer) => (n += c.length));
      res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`GET ${path}: HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Thread ids picked at random rowids (cheap at any size). */
function randomThreadIds(app: App, n: number, total: number): string[] {
  const byRowid = app.db.prepare('SELECT id FROM llm_threads WHERE rowid = ?').pluck();
  return Array.from({ length: n }, () => byRowid.get(1 + Math.floor(Math.random() * total)) as string);
}

type Kind = 'page' | 'deepPage' | 'htmlPage' | 'thread';

async function measure(home: string, total: number): Promise<Record<Kind, { p50: number; p95: number }>> {
  const app = appFor(home, 1);
  await app.engine.stop(0); // nothing to run: only reads are measured
  let server: HttpServer | null = null;
  try {
    server = await startHttpServer({ services: app, home, port: 0, logger: createLogger(null, 'silent'), dashboard: createDashboard() });
    const token = (await import('node:fs')).readFileSync(join(home, 'http.token'), 'utf8').trim();
    const ids = randomThreadIds(app, QUERIES, total);
    const paths: Record<Kind, (i: number) => [string, string?]> = {
      page: () => ['/threads?limit=50'],
      deepPage: (i) => [`/threads?limit=50&cursor=${ids[i]}`],
      htmlPage: () => ['/threads?limit=50', 'text/html'],
      thread: (i) => [`/threads/${ids[i]}`],
    };
    const out = {} as Record<Kind, { p50: number; p95: number }>;
    for (const [kind, pathOf] of Object.entries(paths) as [Kind, (i: number) => [string, string?]][]) {
      for (let i = 0; i < 20; i++) await get(server.port, ...withToken(pathOf(i), token)); // warm-up
      const lat: number[] = [];
      for (let i = 0; i < QUERIES; i++) {
        const t0 = performance.now();
        await get(server.port, ...withToken(pathOf(i), token));
        lat.push(performance.now() - t0);
      }
      out[kind] = { p50: quantile(lat, 0.5), p95: quantile(lat, 0.95) };
    }
    return out;
  } finally {
    await server?.close();
    await app.shutdown(0);
  }
}

function withToken([path, accept]: [string, string?], token: string): [string, string, string?] {
  return accept ? [path, token, accept] : [path, token];
}

const LABEL: Record<Kind, string> = {
  page: '`GET /threads?limit=50` (first page, JSON)',
  deepPage: '`GET /threads?limit=50&cursor=…` (a page anywhere)',
  htmlPage: 'dashboard threads page (HTML, 50 rows)',
  thread: '`GET /threads/{id}`',
};

export async function httpTargets(runs: number): Promise<Row[]> {
  const smallHome = mkdtempSync(join(tmpdir(), 'cmb-bench-http-small-'));
  const bigHome = mkdtempSync(join(tmpdir(), 'cmb-bench-http-1m-'));
  const m = `${(CLOSED_THREADS / 1e6).toFixed(CLOSED_THREADS % 1e6 ? 1 : 0)}M`;
  try {
    const t0 = performance.now();
    fillClosedThreads(bigHome, CLOSED_THREADS);
    fillClosedThreads(smallHome, SMALL);
    console.error(`http: ${CLOSED_THREADS.toLocaleString('en-US')} closed threads written in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const results: Record<'small' | 'big', Record<Kind, { p50: number[]; p95: number[] }>> = { small: {} as any, big: {} as any };
    for (let run = 0; run < runs; run++) {
      for (const [size, home, total] of (run % 2 === 0
        ? [
            ['small', smallHome, SMALL],
            ['big', bigHome, CLOSED_THREADS],
          ]
        : [
            ['big', bigHome, CLOSED_THREADS],
            ['small', smallHome, SMALL],
          ]) as ['small' | 'big', string, number][]) {
        const r = await measure(home, total);
        for (const kind of Object.keys(r) as Kind[]) {
          const slot = (results[size][kind] ??= { p50: [], p95: [] });
          slot.p50.push(r[kind].p50);
          slot.p95.push(r[kind].p95);
        }
      }
    }
    const rows: Row[] = [];
    for (const kind of Object.keys(LABEL) as Kind[]) {
      rows.push(
        row({ target: '7', figure: `${LABEL[kind]} p50, ${SMALL.toLocaleString('en-US')} threads`, runs: results.small[kind].p50, unit: 'ms', goal: '' }),
      );
      rows.push(row({ target: '7', figure: `${LABEL[kind]} p50, ${m} closed threads`, runs: results.big[kind].p50, unit: 'ms', goal: '' }));
      rows.push(
        row({
          target: '7',
          figure: `${LABEL[kind]} p95, ${m} closed threads`,
          runs: results.big[kind].p95,
          unit: 'ms',
          goal: `≤ ${P95_GOAL_MS} ms`,
          check: (x) => x <= P95_GOAL_MS,
        }),
      );
    }
    return rows;
  } finally {
    agent.destroy();
    rmSync(smallHome, { recursive: true, force: true });
    rmSync(bigHome, { recursive: true, force: true });
  }
}
