/**
 * Load-independent counts of target 1's engine run (bench row 1's workload, in process): promises created
 * and bytes allocated per item, counted over the measured run only (from the seeded point to the last
 * applied item). Timings on a shared machine move with other processes' load; these do not, so an A/B of
 * the engine's JS work reads them from two trees back to back.
 *
 *   npx tsx bench/engine-counts.ts [projects=200] [epics=10] [top=25]
 *   ENGINE_COUNTS_POSTGRES=1 npx tsx bench/engine-counts.ts …   # the App on Postgres (a server of its own, a database per run)
 *
 * Allocations come from the inspector's sampling heap profiler with the objects GC collected included
 * (one sample per 4 KiB allocated): the bytes per item and the functions that allocated most, by self size.
 * The promise count comes from an async_hooks hook, enabled in a separate run (it slows the run).
 */
import { createHook } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { Session } from 'node:inspector/promises';
import { adminQuery, databaseUrl, startPostgres } from '../test/helpers/postgres-server.js';
import { runEngineOnce } from './lib/engine-run.js';

interface SamplingNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SamplingNode[];
}

const [projects = 200, epicsPerProject = 10, top = 25] = process.argv.slice(2).map(Number);
// On Postgres the engine reaches the server through its Unix socket, as bench target 9's daemons do.
const server = process.env.ENGINE_COUNTS_POSTGRES ? await startPostgres({ durable: true }) : null;
async function freshDatabase(): Promise<string | undefined> {
  if (!server) return undefined;
  const name = `combine_counts_${randomBytes(6).toString('hex')}`;
  await adminQuery(server.adminUrl, `CREATE DATABASE ${name}`);
  return server.viaSocket(databaseUrl(server.adminUrl, name));
}
const run = async (onSeeded: () => Promise<void>) =>
  runEngineOnce({ projects, epicsPerProject, maxInFlight: 256, onSeeded, databaseUrl: await freshDatabase() });

await run(async () => {}); // warm-up: the measured runs see optimized code

let promises = 0;
const hook = createHook({
  init(_id, type) {
    if (type === 'PROMISE') promises++;
  },
});
const counted = await run(async () => {
  hook.enable();
});
hook.disable();

const session = new Session();
session.connect();
await session.post('HeapProfiler.enable');
const sampled = await run(async () => {
  // The two include flags exist since V8 11 (Node 20); the protocol types Node ships lack them.
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  } as object);
});
const { profile } = await session.post('HeapProfiler.stopSampling');
session.disconnect();

const bySite = new Map<string, number>();
let bytes = 0;
const walk = (node: SamplingNode) => {
  const f = node.callFrame;
  const site = `${f.functionName || '(anon)'} ${f.url.replace(/.*\/(src|node_modules)\//, '$1/')}:${f.lineNumber}`;
  bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
  bytes += node.selfSize;
  for (const child of node.children) walk(child);
};
walk(profile.head as SamplingNode);

console.log(
  `items ${counted.items}; promises per item ${(promises / counted.items).toFixed(1)}; bytes allocated per item ${Math.round(bytes / sampled.items)}`,
);
for (const [site, size] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${String(Math.round(size / sampled.items)).padStart(8)}  ${site}`);
await server?.stop();
