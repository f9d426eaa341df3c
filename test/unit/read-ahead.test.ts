/**
 * Operations' functions are synchronous, storage is async: they read documents through read-ahead, and a
 * read not loaded yet runs the function again once it is. Documents the function read on its previous
 * call are loaded before the next call's first run, so the engine's usual call runs it once. Real SQLite
 * file, a real operation from a validated definition.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { insertDocument, insertProject } from '../../src/db/projects.js';
import { SqliteSql } from '../../src/db/sql.js';
import { documentsOf, runReadingDocuments } from '../../src/daemon/engine/operation-context.js';
import { runWithReads } from '../../src/daemon/engine/read-ahead.js';
import { OperationRegistry } from '../../src/operations/registry.js';
import { validateDefinition } from '../../src/operations/validate.js';
import { operationSettingsOf, loadConfig } from '../../src/daemon/config/config.js';

describe('read-ahead', () => {
  let dir: string;
  let db: Db;
  let sql: SqliteSql;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-readahead-'));
    db = openDatabase(join(dir, 'r.db'));
    sql = new SqliteSql(db);
    applyMigrations(db);
    for (const p of ['p', 'q']) {
      await insertProject(sql, { id: p, name: p, created_at: 0 });
      await insertDocument(sql, { id: `${p}-notes`, project_id: p, doc_type: 'notes', version: 1, content: JSON.stringify({ of: p }), updated_at: 0 });
      await insertDocument(sql, { id: `${p}-style`, project_id: p, doc_type: 'style', version: 1, content: '{"tone":"dry"}', updated_at: 0 });
    }
  });
  afterEach(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs a function again per value it read that was not loaded, even when it swallowed the miss', async () => {
    let runs = 0;
    const result = await runWithReads((reads) => {
      runs++;
      const documents = documentsOf(sql, reads, 'p');
      let style: unknown = null;
      try {
        style = documents.get('style');
      } catch {
        // a function that catches everything still gets the value on its next run
      }
      return { notes: documents.get('notes'), style };
    });
    expect(result).toEqual({ notes: { of: 'p' }, style: { tone: 'dry' } });
    expect(runs).toBe(3);
  });

  it("loads the documents a function read on its previous call before the next call's first run", async () => {
    const definition = validateDefinition(
      {
        name: 'annotate',
        description: 'reads two documents',
        input: { type: 'object', properties: {} },
        identity: () => ({ space_type: 'project', space_id: 'p', target_doc_type: 'notes', target_id: 'one' }),
        lockScope: () => 'annotate',
        target: () => ({ project_id: 'p', doc_type: 'notes' }),
        prompt: () => ({ messages: [{ role: 'user', content: 'annotate' }] }),
        output: { type: 'object' },
        apply: ({ answer }: { answer: unknown }) => ({ content: answer, summary: {} }),
      },
      'test',
    );
    const op = new OperationRegistry([definition], operationSettingsOf(loadConfig(dir, {}))).get('annotate')!;
    let runs = 0;
    const call = (projectId: string, expected: [string, string][] = []) =>
      runReadingDocuments(
        sql,
        projectId,
        { op, fn: 'apply' },
        (reads) => {
          runs++;
          const documents = documentsOf(sql, reads, projectId);
          return [documents.get('notes'), documents.get('style')];
        },
        expected,
      );

    expect(await call('p')).toEqual([{ of: 'p' }, { tone: 'dry' }]);
    expect(runs).toBe(3);
    runs = 0;
    // Another project: the same document types are loaded ahead, from that project.
    expect(await call('q')).toEqual([{ of: 'q' }, { tone: 'dry' }]);
    expect(runs).toBe(1);
    // A document the caller names is loaded ahead too; one the function no longer reads is not kept.
    runs = 0;
    const fresh = { op: new OperationRegistry([definition], operationSettingsOf(loadConfig(dir, {}))).get('annotate')!, fn: 'apply' };
    const notesOnly = (reads: Parameters<Parameters<typeof runWithReads>[0]>[0]) => {
      runs++;
      return documentsOf(sql, reads, 'p').get('notes');
    };
    expect(await runReadingDocuments(sql, 'p', fresh, notesOnly, [['notes', '']])).toEqual({ of: 'p' });
    expect(runs).toBe(1);
  });
});
