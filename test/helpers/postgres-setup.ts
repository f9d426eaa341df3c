/**
 * vitest globalSetup: one real Postgres for the whole test run (started once, ~1.3 s here), its admin
 * URL provided to every test file, which creates databases of its own on it (test/helpers/postgres.ts).
 */
import type { TestProject } from 'vitest/node';
import { startPostgres } from './postgres-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Superuser URL of the run's Postgres server (database `postgres`). */
    postgresAdminUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startPostgres();
  project.provide('postgresAdminUrl', server.adminUrl);
  return () => server.stop();
}
