/**
 * Daemons sharing a Postgres database enforce one set of limits (runtime/daemon-registry.ts): a daemon
 * whose budgets, prices or rate limits differ from a live daemon's refuses to start, naming what differs,
 * because the claim enforces each daemon's own values and together they would spend past the stricter
 * budget. A daemon stopped gracefully stops counting at once, a new process of the same home replaces its
 * killed predecessor, and the refused daemon leaves nothing behind. Postgres project only.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { DaemonGroup } from '../helpers/daemons.js';
import type { Harness } from '../helpers/harness.js';

let g: DaemonGroup;
afterEach(() => g?.cleanup());

const BUDGETED = { budgets: { projects: { shop: { daily_tokens: 5000 } } } };
const LOOSER = { budgets: { projects: { shop: { daily_tokens: 9000 } } }, rate_limits: { 'test-model': { requests_per_minute: 60 } } };

async function registered(h: Harness): Promise<number> {
  return (await h.queryOne<{ n: number }>('SELECT count(*) AS n FROM llm_daemons'))!.n;
}

describe('daemons on one database share their limits', () => {
  it('refuses to start a daemon whose limits differ from a live one, naming the difference, until that one is gone', async () => {
    g = await DaemonGroup.start(3);
    const [a, b, c] = g.members as [Harness, Harness, Harness];
    a.writeConfig(BUDGETED);
    b.writeConfig({});
    c.writeConfig(BUDGETED);
    await a.startDaemon();
    expect(await registered(a)).toBe(1);

    // B has no budget for "shop": it would claim the project's items unchecked.
    const refused = await b.cli(['daemon', 'start']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('budgets.projects.shop.daily_tokens: not set here, 5000 there');
    expect(b.daemonPid()).toBeNull();
    expect(b.logText()).toContain('refusing to start');
    expect(await registered(a)).toBe(1); // the refused daemon left no row

    // Same limits: C joins.
    await c.startDaemon();
    expect(await registered(a)).toBe(2);

    // A is killed: its row counts until the same home starts again, which replaces it.
    await a.killDaemon();
    expect(await registered(a)).toBe(2);
    await a.startDaemon();
    expect(await registered(a)).toBe(2);

    // Both stopped gracefully (C) or gone: B, now with other limits again, names each difference.
    b.writeConfig(LOOSER);
    const second = await b.cli(['daemon', 'start']);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain('budgets.projects.shop.daily_tokens: 9000 here, 5000 there');
    expect(second.stderr).toMatch(/routes\.test-model\.requests_per_minute: 60 here, (null|not set) there/);
    await a.stopDaemon();
    await c.stopDaemon();
    expect(await registered(a)).toBe(0);
    await b.startDaemon();
    expect(await registered(a)).toBe(1);
  });
});
