/**
 * Two daemons on one Postgres database claim their own projects first (domain/project-owners.ts, the fair
 * scheduler's rule 3), and the other's when theirs have nothing left to claim: no project waits while a
 * daemon has a free slot. Two real Apps (homes of their own, registered in `llm_daemons`) on one
 * embedded Postgres, real simulator over HTTP holding every call open, so what each claimed stays leased.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { assignProjectOwners } from '../../src/domain/project-owners.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project, waitUntil } from '../helpers/harness.js';
import { settled } from '../helpers/pg-race.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

const PROJECTS = ['p0', 'p1', 'p2', 'p3'];
const SLOTS = 4;

describe('two daemons on one Postgres prefer their own projects', () => {
  let dirs: string[];
  let sim: Simulator;
  let database: TestDatabase;
  const apps: App[] = [];

  beforeEach(async () => {
    dirs = [];
    sim = await createSimulator({ faults: [{ kind: 'hang' }] });
    database = await createTestDatabase({ migrated: true });
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.shutdown(0);
    await database.drop();
    await sim.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * An App with a home of its own (its own owner id) on the shared database. Its pressure signals are
   * read under the home, never the machine's /proc: on battery under min_percent (bulk paused) if asked.
   */
  function newApp(onBattery = false): App {
    const dir = mkdtempSync(join(tmpdir(), 'cmb-owners-'));
    dirs.push(dir);
    const root = join(dir, 'pressure-root');
    mkdirSync(root);
    if (onBattery) {
      const bat = join(root, 'sys', 'class', 'power_supply', 'BAT0');
      mkdirSync(bat, { recursive: true });
      writeFileSync(join(bat, 'type'), 'Battery\n');
      writeFileSync(join(bat, 'capacity'), '5\n');
      writeFileSync(join(bat, 'status'), 'Discharging\n');
    }
    const env = {
      OPENAI_BASE_URL: sim.url,
      OPENAI_API_KEY: 'k',
      COMBINE_MODEL: 'test-model',
      COMBINE_DATABASE_URL: database.url,
      COMBINE_PRESSURE_ROOT: root,
    };
    const app = new App({ config: { ...loadConfig(dir, env), maxInFlight: SLOTS }, logger: createLogger(null, 'silent') });
    apps.push(app);
    return app;
  }

  /**
   * Two daemons registered (not started), each project's owner as they will compute it, and the queue
   * filled with `epics(owner)` epics per project (generate-all: an item per epic) by a third App that never claims.
   */
  async function twoDaemons(epicsOf: (owner: 'a' | 'b') => number, aOnBattery = false) {
    const a = newApp(aOnBattery);
    await a.joinSharedDatabase();
    const ownerOf = async () => (await a.reader.all<{ owner: string }>('SELECT owner FROM llm_daemons')).map((r) => r.owner);
    const [ownerA] = await ownerOf();
    const b = newApp();
    await b.joinSharedDatabase();
    const ownerB = (await ownerOf()).find((o) => o !== ownerA)!;
    const owners = assignProjectOwners(PROJECTS, [ownerA!, ownerB]);
    const projectsOf = (owner: string) => PROJECTS.filter((p) => owners.get(p) === owner);
    const seed = newApp();
    await seed.engine.stop(0);
    for (const p of PROJECTS) {
      await seed.projects.import(project(p, epicsOf(owners.get(p) === ownerA ? 'a' : 'b')));
      await seed.threads.generateAll(p, { force: false, deadlineMs: null, createdBy: null });
    }
    await seed.shutdown(0);
    apps.splice(apps.indexOf(seed), 1);
    return { a, b, ownerA: ownerA!, ownerB, ownProjects: { a: projectsOf(ownerA!), b: projectsOf(ownerB) }, owners };
  }

  const leasedOf = (app: App) =>
    app.reader.all<{ project_id: string; lease_owner: string }>("SELECT project_id, lease_owner FROM llm_work_items WHERE status IN ('claimed', 'running')");
  const queuedOf = async (app: App) => Number((await app.reader.get<{ n: number }>("SELECT count(*) AS n FROM llm_work_items WHERE status = 'queued'"))?.n);

  it('each claims only its own projects while they have queued items, though every project has some', async () => {
    const { a, b, ownerA, ownerB, ownProjects, owners } = await twoDaemons(() => 4);
    expect(ownProjects.a).toHaveLength(2);
    expect(ownProjects.b).toHaveLength(2);
    await a.start();
    await b.start();
    await a.engine.claimDue();
    await b.engine.claimDue();
    const leased = await leasedOf(a);
    expect(leased).toHaveLength(2 * SLOTS);
    // Without the preference each daemon's round takes every project in turn (one item of each of the four).
    for (const l of leased) expect(l.lease_owner, l.project_id).toBe(owners.get(l.project_id));
    expect(leased.filter((l) => l.lease_owner === ownerA)).toHaveLength(SLOTS);
    expect(leased.filter((l) => l.lease_owner === ownerB)).toHaveLength(SLOTS);
    expect(await queuedOf(a)).toBe(4 * 4 - 2 * SLOTS);
  });

  it("takes the other's items with the slots its own projects cannot fill: no project waits while a slot is free", async () => {
    // B's projects have one item each: two of B's four slots are left for A's projects.
    const { a, b, ownerA, ownerB, ownProjects } = await twoDaemons((owner) => (owner === 'a' ? 4 : 1));
    await a.start();
    await a.engine.claimDue();
    const ofA = await leasedOf(a);
    expect(ofA).toHaveLength(SLOTS);
    for (const l of ofA) expect(ownProjects.a).toContain(l.project_id);
    await b.start();
    await b.engine.claimDue();
    const ofB = (await leasedOf(b)).filter((l) => l.lease_owner === ownerB);
    expect(ofB).toHaveLength(SLOTS);
    expect(ofB.filter((l) => ownProjects.b.includes(l.project_id))).toHaveLength(2);
    expect(ofB.filter((l) => ownProjects.a.includes(l.project_id))).toHaveLength(2);
    // Every slot busy; what waits is A's, and only because both daemons are full.
    expect((await leasedOf(a)).filter((l) => l.lease_owner === ownerA)).toHaveLength(SLOTS);
    expect(await queuedOf(a)).toBe(2 * 4 + 2 - 2 * SLOTS);
  });

  it('a live owner paused by pressure owns nothing: the other daemon serves its projects though it has its own backlog', async () => {
    // A is on battery under min_percent: only interactive work. Without the `claiming` flag A kept owning
    // its projects and B took only its own (A's got nothing until B's own backlog drained).
    const { a, b, ownerB, ownProjects } = await twoDaemons(() => 4, true);
    await a.start();
    await a.engine.claimDue();
    expect(a.pressure.snapshot().paused).toEqual(['bulk', 'scheduled']);
    expect(await leasedOf(a)).toHaveLength(0);
    await b.start();
    await b.engine.claimDue();
    const ofB = (await leasedOf(b)).filter((l) => l.lease_owner === ownerB);
    expect(ofB).toHaveLength(SLOTS);
    // B alone claims: no preference, every project in turn (one item of each of the four).
    expect(ofB.filter((l) => ownProjects.a.includes(l.project_id))).toHaveLength(2);
  });

  it('a stopping daemon gives up its projects when it stops claiming, before its drain ends', async () => {
    // Calls held until released, so A's drain can end.
    sim.setFaults([{ kind: 'hold' }]);
    const { a, b, ownerA, ownerB, ownProjects } = await twoDaemons(() => 4);
    await a.start();
    await a.engine.claimDue();
    const ofA = await leasedOf(a);
    expect(ofA).toHaveLength(SLOTS);
    for (const l of ofA) expect(ownProjects.a).toContain(l.project_id);
    // A drains its calls for as long as they are held; its row says meanwhile that it claims no more (at
    // once: shutdown renews when the engine stops claiming; the periodic renewal would say it within
    // RENEW_MS). Were ownership left only after the drain, this wait would time out (10 s).
    apps.splice(apps.indexOf(a), 1);
    const stopped = a.shutdown(600_000);
    const claimingOf = async () => (await b.reader.get<{ claiming: number }>('SELECT claiming FROM llm_daemons WHERE owner = ?', [ownerA]))?.claiming;
    await waitUntil(async () => (await claimingOf()) === 0, "A's row to say it claims no more", 10_000);
    // B reads it at its first renewal: it alone claims, every project in turn, A's too.
    await b.start();
    await b.engine.claimDue();
    const ofB = (await leasedOf(b)).filter((l) => l.lease_owner === ownerB);
    expect(ofB).toHaveLength(SLOTS);
    expect(ofB.filter((l) => ownProjects.a.includes(l.project_id))).toHaveLength(2);
    // A is still draining: its calls are still held.
    expect((await leasedOf(b)).filter((l) => l.lease_owner === ownerA)).toHaveLength(SLOTS);
    // Released as they arrive (some may still be on their way), until A's drain ends.
    const drained = settled(stopped);
    await waitUntil(() => {
      sim.release();
      return drained();
    }, "A's drain to end");
    expect((await stopped).abandoned).toBe(0);
  });
});
