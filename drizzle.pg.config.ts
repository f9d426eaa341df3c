import { defineConfig } from 'drizzle-kit';

/** The Postgres schema's migrations (the SQLite ones are drizzle.config.ts's). */
export default defineConfig({
  dialect: 'postgresql',
  schema: ['./src/db/pg/schema.ts', './src/db/pg/schema-schedules.ts'],
  out: './migrations/pg',
});
