/**
 * The `pg` driver, loaded on first use: a daemon whose state is in SQLite (the default) never loads
 * it, nor holds its code and objects (~3 MiB of heap, ~6 MiB of RSS). Loaded with `require` because the
 * callers are synchronous (a storage opened in a constructor, a literal escaped in a write) and `pg` is
 * a CommonJS package: the same module instance as an `import` of it would give.
 */
import { createRequire } from 'node:module';
import type pgModule from 'pg';

const load = createRequire(import.meta.url);
let driver: typeof pgModule | null = null;

export function pgDriver(): typeof pgModule {
  driver ??= load('pg') as typeof pgModule;
  return driver;
}
