/**
 * Migration 0011 on a home written before operations were definitions: every thread gets the input
 * its work is rebuilt from (its target_ref without doc_type) and its role (an orchestration is the
 * thread with no work item), so threads in flight at the upgrade keep running. No operation is named.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/connection.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { migrationsBefore } from '../helpers/migrations.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('migration 0011 (thread role and input)', () => {
  it('backfills the input and role of existing threads', () => {
    const home = mkdtempSync(join(tmpdir(), 'cmb-home-'));
    dirs.push(home);
    const db = openDatabase(join(home, 'combine.db'));
    applyMigrations(db, migrationsBefore('0011_thread_role_input', dirs));
    const thread = db.prepare(
      `INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, status, parent_thread_id, idempotency_key, created_by, created_at, closed_at)
       VALUES (?, ?, 'project', 'p', ?, ?, ?, ?, NULL, 1, NULL)`,
    );
    const item = db.prepare(
      `INSERT INTO llm_work_items (id, thread_id, sequence, status, lock_scope, project_id, not_before, created_at) VALUES (?, ?, 1, 'queued', 'epic:p:E1', 'p', 1, 1)`,
    );
    thread.run('parent', 'story_generate_all', '{"doc_type":"story_backlog","project_id":"p"}', 'running', null, 'k-all');
    thread.run('child', 'story_generate_epic', '{"doc_type":"story_backlog","project_id":"p","epic_id":"E1"}', 'open', 'parent', 'k-e1');
    thread.run('brief', 'project_briefing', '{"doc_type":"briefing","project_id":"p","date":"2026-03-01"}', 'open', null, 'k-b');
    item.run('w1', 'child');
    item.run('w2', 'brief');
    applyMigrations(db);
    expect(db.prepare('SELECT id, role, input FROM llm_threads ORDER BY id').all()).toEqual([
      { id: 'brief', role: 'work', input: '{"project_id":"p","date":"2026-03-01"}' },
      { id: 'child', role: 'work', input: '{"project_id":"p","epic_id":"E1"}' },
      { id: 'parent', role: 'orchestration', input: '{"project_id":"p"}' },
    ]);
    expect(db.prepare('SELECT input FROM schedules').all()).toEqual([]);
    db.close();
  });
});
