/**
 * Several daemons on one Postgres database (issue 18): each with its own COMBINE_HOME (socket, pid, log,
 * config), all with the same database URL and the same simulator — the first harness's. The other
 * harnesses' own simulators and databases go unused: read stored state through `first.query` (another
 * member's `query` reads its own, empty database). Postgres project only.
 */
import { Harness } from './harness.js';
import type { SimulatorOptions } from '../../src/sim/simulator.js';

export class DaemonGroup {
  private constructor(readonly members: Harness[]) {}

  /** `n` homes sharing the first one's database and simulator; no daemon started yet. */
  static async start(n: number, sim: SimulatorOptions = {}): Promise<DaemonGroup> {
    const first = await Harness.start(sim);
    if (!first.database) throw new Error('DaemonGroup needs the postgres test backend (COMBINE_TEST_BACKEND=postgres)');
    const members = [first];
    for (let i = 1; i < n; i++) {
      const h = await Harness.start();
      h.env.COMBINE_DATABASE_URL = first.database.url;
      h.env.OPENAI_BASE_URL = first.sim.url;
      members.push(h);
    }
    return new DaemonGroup(members);
  }

  /** The simulator every daemon calls. */
  get sim() {
    return this.members[0]!.sim;
  }

  get first(): Harness {
    return this.members[0]!;
  }

  writeConfig(config: unknown): void {
    for (const h of this.members) h.writeConfig(config);
  }

  async startAll(): Promise<void> {
    await Promise.all(this.members.map((h) => h.startDaemon()));
  }

  /** Kills every daemon, then cleans the homes up; the shared database goes last, with the first harness. */
  async cleanup(): Promise<void> {
    await Promise.all(this.members.map((h) => h.killDaemon()));
    for (const h of this.members.slice(1)) await h.cleanup();
    await this.first.cleanup();
  }
}
