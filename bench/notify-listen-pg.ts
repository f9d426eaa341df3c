/**
 * What one `combine_events` notification costs a daemon that does not follow anything, on Postgres alone
 * (issue 18 target 9): a listening session in a process of its own (node-postgres, as the daemon's
 * PgListener: it parses each payload as cluster-changes.ts does) while this process commits `count`
 * transactions, each sending one `combine_events` notification (the engine sends ~3 per item). Two
 * modes, alternated in rounds: the listener LISTENs to `combine_events` and `combine_work` (as every daemon
 * did), or to `combine_work` only (a daemon without a follower now). Prints per notification the listening
 * process's CPU and its backend's CPU (/proc, user + system).
 *
 *   npx tsx bench/notify-listen-pg.ts [notifications per round=5000] [rounds=4]
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { adminQuery, databaseUrl, startPostgres } from '../test/helpers/postgres-server.js';

const count = Number(process.argv[2] ?? 5000);
const rounds = Number(process.argv[3] ?? 4);

function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return ((Number(parts[11]) + Number(parts[12])) * 1000) / 100;
}

/** The listening process: LISTENs to the channels on argv, parses what it gets, prints its backend's pid. */
const LISTENER = `
const pg = require(process.argv[1]);
const client = new pg.Client({ connectionString: process.argv[2] });
let got = 0;
client.on('notification', (m) => { const [id, , parent] = (m.payload ?? '').split(':'); if (id || parent) got++; });
(async () => {
  await client.connect();
  for (const ch of process.argv.slice(3)) await client.query('LISTEN ' + ch);
  const { rows } = await client.query('SELECT pg_backend_pid() AS pid');
  process.stdout.write(rows[0].pid + '\\n');
  process.stdin.on('data', () => process.stdout.write(got + '\\n'));
})();
`;

async function listenerProcess(url: string, channels: string[]) {
  const child = spawn(process.execPath, ['-e', LISTENER, require.resolve('pg'), url, ...channels], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let waiting: ((l: string) => void) | null = null;
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (waiting) {
        const w = waiting;
        waiting = null;
        w(line);
      } else lines.push(line);
    }
  });
  const next = () => (lines.length > 0 ? Promise.resolve(lines.shift()!) : new Promise<string>((r) => (waiting = r)));
  const backend = Number(await next());
  return {
    pid: child.pid!,
    backend,
    /** How many notifications it parsed so far. */
    received: async () => {
      child.stdin.write('\n');
      return Number(await next());
    },
    stop: () => child.kill(),
  };
}

const require = (await import('node:module')).createRequire(import.meta.url);
const server = await startPostgres();
try {
  await adminQuery(server.adminUrl, 'CREATE DATABASE notify_bench');
  const url = databaseUrl(server.adminUrl, 'notify_bench');
  const sender = new pg.Client({ connectionString: url });
  await sender.connect();
  const modes = { 'events and work': ['combine_events', 'combine_work'], 'work only': ['combine_work'] } as const;
  const totals = new Map<string, { process: number; backend: number; n: number }>();
  for (let r = 0; r < rounds; r++) {
    for (const [mode, channels] of Object.entries(modes)) {
      const l = await listenerProcess(url, [...channels]);
      await new Promise((res) => setTimeout(res, 300)); // its start-up's CPU settles
      const p0 = cpuMs(l.pid);
      const b0 = cpuMs(l.backend);
      for (let i = 0; i < count; i++) {
        await sender.query(`BEGIN; SELECT pg_notify('combine_events', 'thread-${i}:0:parent'); COMMIT`);
      }
      // A marker on the channel it always listens to: everything before it has been delivered once it parsed it.
      await sender.query(`SELECT pg_notify('combine_work', 'marker:0:')`);
      const want = channels.length === 2 ? count + 1 : 1;
      while ((await l.received()) < want) await new Promise((res) => setTimeout(res, 20));
      const t = totals.get(mode) ?? { process: 0, backend: 0, n: 0 };
      t.process += cpuMs(l.pid) - p0;
      t.backend += cpuMs(l.backend) - b0;
      t.n += count;
      totals.set(mode, t);
      l.stop();
    }
  }
  for (const [mode, t] of totals)
    console.log(
      `listening to ${mode}: per combine_events notification, listening process ${((t.process * 1000) / t.n).toFixed(1)} µs, its backend ${((t.backend * 1000) / t.n).toFixed(1)} µs (${t.n} notifications)`,
    );
  await sender.end();
} finally {
  await server.stop();
}
