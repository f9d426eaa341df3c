/**
 * vitest globalSetup: one real Postgres for the whole test run (started once, ~1.3 s here), its admin
 * URL provided to every test file, which creates databases of its own on it (test/helpers/postgres.ts),
 * and a template database migrated once, which a harness's database is copied from instead of every
 * daemon migrating an empty one (~0.35 s each, a few hundred times in the postgres project).
 */
import type { TestProject } from 'vitest/node';
import { randomBytes } from 'node:crypto';
import { applyPgMigrations } from '../../src/db/pg/migrate.js';
import { adminQuery, databaseUrl, startPostgres } from './postgres-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Superuser URL of the run's Postgres server (database `postgres`). */
    postgresAdminUrl: string;
    /** A database with every migration of `migrations/pg/` applied, for `CREATE DATABASE … TEMPLATE`; never connected to again. */
    postgresTemplate: string;
    /** The directory of the server's Unix socket (a URL's `host` parameter). */
    postgresSocketDir: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startPostgres();
  project.provide('postgresAdminUrl', server.adminUrl);
  project.provide('postgresTemplate', await createMigratedTemplate(server.adminUrl));
  project.provide('postgresSocketDir', server.socketDir);
  return () => server.stop();
}

/** Creates a database and applies every migration to it; returns its name. */
async function createMigratedTemplate(adminUrl: string): Promise<string> {
  const name = `combine_template_${randomBytes(6).toString('hex')}`;
  await adminQuery(adminUrl, `CREATE DATABASE ${name}`);
  await applyPgMigrations(databaseUrl(adminUrl, name));
  return name;
}
