/**
 * The settings of daemons sharing a database: `engine.lease` (how long a dead daemon's items wait) and
 * `database.max_clock_skew`, resolved from config.json with their defaults; a lease too short for three
 * heartbeats is refused, naming the field.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/core/errors.js';
import { engineSettingsOf, loadConfig } from '../../src/daemon/config/config.js';
import { configFileView } from '../../src/daemon/config/file-view.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cmb-shared-config-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const env = { OPENAI_API_KEY: 'k', COMBINE_DATABASE_URL: 'postgres://u@localhost:5432/db' };
const load = (file: unknown) => {
  writeFileSync(join(dir, 'config.json'), JSON.stringify(file));
  return loadConfig(dir, env);
};

describe('shared-database settings', () => {
  it('default to a lease of the call timeout + 30 s and a 5 s clock skew, shown only when set', () => {
    const c = load({ provider: { timeout: '20s' } });
    expect(engineSettingsOf(c).leaseMs).toBeUndefined(); // the engine derives provider.timeout + 30 s
    expect(c.maxClockSkewMs).toBe(5_000);
    const view = configFileView(c);
    expect(view.engine).not.toHaveProperty('lease');
    expect(view.database).toEqual({ url: 'postgres://u@localhost:5432/db' });
  });

  it('take engine.lease and database.max_clock_skew from config.json', () => {
    const c = load({ engine: { lease: '8s' }, database: { max_clock_skew: '2s' } });
    expect(engineSettingsOf(c).leaseMs).toBe(8_000);
    expect(c.maxClockSkewMs).toBe(2_000);
    const view = configFileView(c);
    expect(view.engine).toMatchObject({ lease: '8s' });
    expect(view.database).toEqual({ url: 'postgres://u@localhost:5432/db', max_clock_skew: '2s' });
  });

  it('refuses a lease shorter than three heartbeats, naming the field', () => {
    expect(() => load({ engine: { lease: '2s' } })).toThrow(ConfigError);
    expect(() => load({ engine: { lease: '2s' } })).toThrow(/engine\.lease.*at least 3s/);
  });
});
