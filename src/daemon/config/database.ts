/**
 * Where the daemon keeps its state. Without a database URL: SQLite, the file `combine.db` in
 * COMBINE_HOME, one daemon per file. With `COMBINE_DATABASE_URL=postgres://…` (or config `database.url`;
 * the environment wins): Postgres, shared by every daemon given the same URL — each still keeps its own
 * COMBINE_HOME for its socket, logs, pid and token.
 *
 * The URL may carry a password: it is a secret (the log file redacts it), and everything that shows the
 * configuration shows `redactDatabaseUrl(url)` instead.
 */
import { z } from 'zod';
import { ConfigError } from '../../core/errors.js';
import { duration } from './limits.js';

export const databaseConfigFileSchema = {
  database: z
    .object({
      /** `postgres://user:password@host:5432/db`: state in Postgres instead of COMBINE_HOME/combine.db. */
      url: z.string().min(1).max(4096).optional(),
      /**
       * Postgres: the most this daemon's clock may differ from the database server's at start (default
       * 5s). Leases are stamped with each daemon's own clock, so a daemon running ahead would take other
       * daemons' live items early: it refuses to start instead.
       */
      max_clock_skew: duration.optional(),
    })
    .strict()
    .optional(),
};

type DatabaseFile = { [K in keyof typeof databaseConfigFileSchema]?: z.infer<(typeof databaseConfigFileSchema)[K]> };

export interface DatabaseConfig {
  /** A Postgres URL, or null for SQLite in COMBINE_HOME. */
  databaseUrl: string | null;
  /** Config `database.max_clock_skew` (Postgres only). */
  maxClockSkewMs: number;
}

export const DEFAULT_MAX_CLOCK_SKEW_MS = 5_000;

const PROTOCOLS = ['postgres:', 'postgresql:'];

/** The database URL from `COMBINE_DATABASE_URL` or `database.url`, checked; and the secrets it carries. */
export function resolveDatabase(file: DatabaseFile, env: NodeJS.ProcessEnv): DatabaseConfig & { secrets: string[] } {
  const fromEnv = env.COMBINE_DATABASE_URL;
  const raw = fromEnv || file.database?.url || null;
  const maxClockSkewMs = file.database?.max_clock_skew ?? DEFAULT_MAX_CLOCK_SKEW_MS;
  if (raw === null) return { databaseUrl: null, maxClockSkewMs, secrets: [] };
  const field = fromEnv ? 'COMBINE_DATABASE_URL' : 'database.url';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // Not echoed: a malformed URL may still hold a password.
    throw new ConfigError(`${field}: not a URL (expected postgres://user:password@host:5432/database)`);
  }
  if (!PROTOCOLS.includes(url.protocol)) {
    throw new ConfigError(`${field}: "${redactDatabaseUrl(raw)}" is not a Postgres URL (expected postgres://… or postgresql://…)`);
  }
  return { databaseUrl: raw, maxClockSkewMs, secrets: passwordsOf(url) };
}

/** The password as written and decoded, and any `password` query parameter: what the log file must never show. */
function passwordsOf(url: URL): string[] {
  const out: string[] = [];
  if (url.password) out.push(url.password, decodeURIComponent(url.password));
  const query = url.searchParams.get('password');
  if (query) out.push(query, encodeURIComponent(query));
  return [...new Set(out)];
}

/** The URL with its password (in the user part or the query) replaced: safe to show and log. */
export function redactDatabaseUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password) url.password = 'redacted';
    if (url.searchParams.has('password')) url.searchParams.set('password', 'redacted');
    return url.toString();
  } catch {
    return '[unparseable URL, redacted]';
  }
}
