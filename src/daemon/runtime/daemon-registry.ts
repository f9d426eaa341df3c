/**
 * Daemons sharing one Postgres database enforce one set of limits. Budgets, prices and rate limits come
 * from each daemon's own config.json, and the claim's transaction enforces them with that daemon's values:
 * a daemon configured without a project's budget would claim that project's items unchecked, and
 * together the daemons would spend past it. So each daemon registers the limits it enforces
 * (`llm_daemons`), and one whose limits differ from a live daemon's refuses to start, naming what differs.
 *
 * Registration is one write under a transaction lock: of two daemons starting together with different
 * limits, the second sees the first. A daemon renews its row every RENEW_MS; a row not renewed for
 * LAPSE_MS (a killed daemon) no longer counts, and a new process of the same home replaces its home's rows.
 * Each renewal also writes whether this daemon claims bulk work now (`claiming`: not paused by pressure
 * or storage, not stopping) and reads the daemons that do and are live (renewed within LIVE_MS) for
 * `onClaimingDaemons`: only those own projects (domain/project-owners.ts). Liveness and ownership are
 * apart: a daemon paused for hours still renews, but its projects are the others' from their next
 * renewal on (RENEW_MS), and a stopping daemon renews at once (`renewNow`) when it stops claiming,
 * before its drain. RENEW_MS is short for ownership; LAPSE_MS, which drops a killed daemon's limits, is
 * deliberately far longer.
 * `seen_at` is each daemon's own clock, compared with another's: daemons on one database are within
 * `database.max_clock_skew` (5 s) of its server, or they refuse to start (runtime/clock-skew.ts), so
 * LAPSE_MS is far above any skew. A daemon that stalls past LAPSE_MS can be joined by one with other
 * limits meanwhile; it then logs an error at every renewal until an operator stops one of them.
 * Upgrade every daemon of a database together: a daemon of a build before project owners (pg 0022) counts
 * as claiming and is given projects it does not prefer, and its 10 s renewals fall in and out of LIVE_MS —
 * those projects get the others' spare slots only until every daemon runs this build (locality, never
 * correctness: every claim is the same guarded statement).
 */
import { createHash } from 'node:crypto';
import { ConfigError } from '../../core/errors.js';
import type { Sql } from '../../core/sql.js';
import {
  type DaemonRegistration,
  listDaemons,
  lockDaemonRegistry,
  registerDaemon,
  removeLapsedDaemons,
  renewDaemon,
  unregisterDaemon,
} from '../../db/daemon-registry.js';
import { canonicalJson } from '../../domain/canonical-json.js';
import type { FlowConfig } from '../config/flow.js';
import type { ModelRoute } from '../routing/router.js';
import type { Logger } from '../../core/logger.js';

/** Short enough that the others see a daemon join or leave within seconds (project ownership); one small write. */
const RENEW_MS = 2_000;
const LAPSE_MS = 60_000;
/** A daemon renewed within this counts as live for project ownership: several renewals missed, plus the clock skew allowed (5 s). */
const LIVE_MS = 15_000;
/** Differences named in the refusal; the rest are counted. */
const NAMED_DIFFERENCES = 5;

/** The limits a daemon enforces that other daemons on its database must share, as canonical JSON. */
export function sharedLimitsOf(flow: Pick<FlowConfig, 'budgets'>, routes: readonly ModelRoute[]): string {
  const byKey = Object.fromEntries(
    routes.map((r) => [
      r.key,
      { price: r.price ?? null, requests_per_minute: r.rateLimits.requestsPerMinute, tokens_per_minute: r.rateLimits.tokensPerMinute },
    ]),
  );
  return canonicalJson({ budgets: flow.budgets, routes: byKey });
}

export interface DaemonRegistryOptions {
  /** Runs `fn` in one write transaction of the shared database. */
  write: <T>(fn: (sql: Sql, now: number) => Promise<T>) => Promise<T>;
  owner: string;
  homePrefix: string;
  /** sharedLimitsOf(…) of this daemon. */
  limits: string;
  logger: Logger;
  /** Whether this daemon claims bulk work now: written with each renewal (engine.ts `claimsBulk`). */
  claiming: () => boolean;
  /** The owner ids of the live daemons that claim bulk work (this one's if it does) after each join and renewal. */
  onClaimingDaemons?: (owners: readonly string[]) => void;
}

export class DaemonRegistry {
  private timer: NodeJS.Timeout | null = null;
  /** 'in' from a successful join until leave(): only then is there a row of this daemon to renew or remove. */
  private state: 'out' | 'in' | 'left' = 'out';
  /** The renewal in flight: leave() waits for it, so a renewal's re-join cannot land after the goodbye. */
  private renewing: Promise<void> = Promise.resolve();
  private readonly hash: string;

  constructor(private readonly o: DaemonRegistryOptions) {
    this.hash = createHash('sha256').update(o.limits).digest('hex');
  }

  /** Registers this daemon. Throws ConfigError, naming the differences, if a live daemon enforces other limits. */
  async join(): Promise<void> {
    const { owner, homePrefix, limits } = this.o;
    const live = await this.o.write(async (sql, now) => {
      await lockDaemonRegistry(sql);
      await removeLapsedDaemons(sql, { staleBefore: now - LAPSE_MS, home_prefix: homePrefix });
      const other = (await listDaemons(sql)).find((d) => d.settings_hash !== this.hash);
      if (other) throw new ConfigError(refusal(limits, other));
      await registerDaemon(sql, { owner, settings_hash: this.hash, settings: limits, started_at: now, seen_at: now, claiming: this.claimingFlag() });
      return claimingOwners(await listDaemons(sql), now);
    });
    this.state = 'in';
    this.o.onClaimingDaemons?.(live);
  }

  /**
   * Renews the registration at once (the daemons that joined since this one did are read) and then every
   * RENEW_MS until leave(); nothing if this daemon did not join.
   */
  async start(): Promise<void> {
    if (this.state !== 'in') return;
    this.renewing = this.renew();
    await this.renewing;
    this.timer = setInterval(() => {
      this.renewing = this.renew();
    }, RENEW_MS);
    this.timer.unref();
  }

  /**
   * Renews at once, after any renewal in flight: a daemon that stopped claiming (shutdown, before its
   * drain) leaves its projects to the others now, not at the next renewal. Nothing if it is not registered.
   */
  async renewNow(): Promise<void> {
    if (this.state !== 'in') return;
    this.renewing = this.renewing.then(() => this.renew());
    await this.renewing;
  }

  /** Removes this daemon's row, after any renewal in flight; nothing if it never joined. */
  async leave(): Promise<void> {
    if (this.state !== 'in') return;
    this.state = 'left';
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.renewing;
    await this.o.write((sql) => unregisterDaemon(sql, this.o.owner));
  }

  private async renew(): Promise<void> {
    try {
      const row = { owner: this.o.owner, claiming: this.claimingFlag() };
      const live = await this.o.write(async (sql, now) =>
        (await renewDaemon(sql, { ...row, seen_at: now })) ? claimingOwners(await listDaemons(sql), now) : null,
      );
      // Gone: this daemon stalled past LAPSE_MS and another start removed its row. Register again (unless
      // it is leaving); a daemon with other limits that started meanwhile is reported, as this one keeps running.
      if (live) this.o.onClaimingDaemons?.(live);
      else if (this.state === 'in') await this.join();
    } catch (err) {
      this.o.logger.error({ err }, 'renewing this daemon in the shared database failed');
    }
  }

  private claimingFlag(): number {
    return this.o.claiming() ? 1 : 0;
  }
}

/**
 * The owners of the daemons that claim bulk work and were renewed within LIVE_MS (by their own clocks,
 * within the allowed skew of `now`).
 */
function claimingOwners(rows: readonly DaemonRegistration[], now: number): string[] {
  return rows.filter((d) => d.claiming === 1 && d.seen_at >= now - LIVE_MS).map((d) => d.owner);
}

/** The refusal: which limits differ from the live daemon's, with both values. */
function refusal(mine: string, other: DaemonRegistration): string {
  const here = flatten(JSON.parse(mine));
  const there = flatten(JSON.parse(other.settings));
  const paths = [...new Set([...here.keys(), ...there.keys()])].filter((p) => here.get(p) !== there.get(p)).sort();
  const named = paths.slice(0, NAMED_DIFFERENCES).map((p) => `${p}: ${here.get(p) ?? 'not set'} here, ${there.get(p) ?? 'not set'} there`);
  const more = paths.length > named.length ? `; and ${paths.length - named.length} more` : '';
  return (
    `the limits in config.json differ from those of a daemon running on the same database (owner ${other.owner}): ${named.join('; ')}${more}. ` +
    'Daemons sharing a database enforce budgets, prices and rate limits together: give them the same budgets, prices, rate_limits and models ' +
    `(stop them, change every config.json, start them again); a killed daemon's limits stop counting ${LAPSE_MS / 1000} s after it was last seen`
  );
}

/** Leaf values by dotted path, as JSON text. */
function flatten(value: unknown, prefix = '', out = new Map<string, string>()): Map<string, string> {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else if (value !== null) {
    out.set(prefix, JSON.stringify(value));
  }
  return out;
}
