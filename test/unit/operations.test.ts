/**
 * The operation API on its own: validation names the field of a bad definition, the simulator answers
 * any output schema validly, locks are swept by owner whatever their scope, the package exports
 * `defineOperation` with its types, and no code outside the built-ins' folders names a built-in.
 */
import { SqliteSql } from '../../src/db/sql.js';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/connection.js';
import { acquireLock, releaseOrphanedLocks } from '../../src/db/locks.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { compileSchema } from '../../src/operations/json-schema.js';
import { validateDefinition } from '../../src/operations/validate.js';
import { answerFromSchema, schemaInvalid } from '../../src/sim/answers.js';
import { ROOT } from '../helpers/harness.js';

const valid = {
  name: 'release_notes',
  description: 'Release notes',
  input: { type: 'object', properties: { project_id: { type: 'string' } }, required: ['project_id'] },
  identity: () => ({}),
  lockScope: () => 'x',
  target: () => ({}),
  prompt: () => ({ messages: [] }),
  output: { type: 'object', properties: { headline: { type: 'string' } } },
  apply: () => ({}),
};

describe('operation definitions', () => {
  it('accepts a plain object with the API fields, and names the field of each mistake', async () => {
    expect(validateDefinition(valid, 'm.mjs').definition.name).toBe('release_notes');
    expect(validateDefinition({ ...valid, parts: { field: 'notes', key: 'id' } }, 'm.mjs').definition.parts).toEqual({ field: 'notes', key: 'id' });
    const cases: [Record<string, unknown>, string][] = [
      [{ ...valid, name: 'releaseNotes' }, 'm.mjs: name: must be a snake_case name'],
      [{ ...valid, name: 'modules' }, 'm.mjs: name: "modules" is reserved'],
      [{ ...valid, description: 'two\nlines' }, 'm.mjs: description: must be one non-empty line'],
      [{ ...valid, input: { type: 'array' } }, 'm.mjs: input: must describe a JSON object'],
      [{ ...valid, output: { type: 'object', required: 'headline' } }, 'm.mjs: output: is not a valid JSON Schema'],
      [{ ...valid, identity: 'key' }, 'm.mjs: identity: must be a function (got string)'],
      [{ ...valid, apply: undefined }, 'm.mjs: apply: must be a function (got nothing)'],
      [{ ...valid, colour: 'red' }, 'm.mjs: colour: is not a field of an operation definition'],
      [{ ...valid, priority: 'urgent' }, 'm.mjs: priority: must be one of interactive, bulk, scheduled'],
      [{ ...valid, retry: { max_attempts: 0 } }, 'm.mjs: retry.max_attempts: must be an integer from 1 to 100'],
      [{ ...valid, retry: { base: 'soon' } }, 'm.mjs: retry.base: "soon" is not a duration'],
      [{ ...valid, rules: { schema: { type: 'object' } } }, 'm.mjs: rules.check: must be a function'],
      [{ ...valid, children: () => [], child: 'x' }, 'm.mjs: prompt: an operation with children makes no call of its own'],
      [{ ...valid, prompt: undefined, output: undefined, apply: undefined, children: () => [] }, 'm.mjs: child: must name the operation each child runs'],
      [{ ...valid, parts: 'notes' }, 'm.mjs: parts: must be an object {field, key}'],
      [{ ...valid, parts: { field: 'notes' } }, 'm.mjs: parts.key: must be a property name'],
      [{ ...valid, parts: { field: 'notes', key: 'id', by: 'x' } }, 'm.mjs: parts.by: is not a parts option'],
      [[valid] as unknown as Record<string, unknown>, 'm.mjs: default export: must be an operation definition object (got an array)'],
    ];
    for (const [definition, message] of cases) expect(() => validateDefinition(definition, 'm.mjs')).toThrow(message);
  });
});

describe('the simulator answers any output schema', () => {
  const schemas = [
    JSON.parse(readFileSync(join(ROOT, 'test/golden/story-prompt.json'), 'utf8')).response_format.json_schema.schema,
    {
      type: 'object',
      properties: {
        headline: { type: 'string', minLength: 1, maxLength: 30 },
        published: { type: 'string', format: 'date' },
        severity: { enum: ['low', 'high'] },
        score: { type: 'integer', minimum: 1, maximum: 5 },
        ratio: { type: 'number', minimum: 0, maximum: 1 },
        breaking: { type: 'boolean' },
        sections: {
          type: 'array',
          minItems: 2,
          maxItems: 2,
          items: {
            type: 'object',
            properties: { title: { type: 'string' }, items: { type: 'array', items: { type: 'string' } } },
            required: ['title', 'items'],
          },
        },
      },
      required: ['headline', 'published', 'severity', 'score', 'ratio', 'breaking', 'sections'],
      additionalProperties: false,
    },
  ];

  it('with a valid answer that is the same for the same request, and an invalid one on demand', async () => {
    for (const schema of schemas) {
      const check = compileSchema(schema);
      if (!check.ok) throw new Error(check.error);
      const answer = answerFromSchema(schema, 'Release 1.2.0 of ACME', 'Release 1.2.0 of ACME');
      expect(check.check(answer)).toEqual([]);
      expect(answerFromSchema(schema, 'Release 1.2.0 of ACME', 'Release 1.2.0 of ACME')).toEqual(answer);
      expect(answerFromSchema(schema, 'Release 1.3.0 of ACME', 'x')).not.toEqual(answer);
      expect(check.check(schemaInvalid(answer, schema)).length).toBeGreaterThan(0);
    }
  });
});

describe('locks', () => {
  it('are released by owner: an orphan of any scope goes, a lock whose owner still works stays', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cmb-locks-'));
    const db = openDatabase(join(dir, 'combine.db'));
    const sql = new SqliteSql(db);
    try {
      applyMigrations(db);
      for (const scope of ['briefing:p:2026-03-01', 'epic:p:E1', 'project:p', 'release_notes:p:1.2.0']) {
        expect(await acquireLock(sql, { scope, owner: `gone-${scope}`, now: 1, expires_at: null })).toBe(true);
      }
      expect((await releaseOrphanedLocks(sql)).sort()).toEqual(['briefing:p:2026-03-01', 'epic:p:E1', 'project:p', 'release_notes:p:1.2.0']);
      expect(db.prepare('SELECT * FROM locks').all()).toEqual([]);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the package entry', () => {
  it('exports defineOperation and types a definition (dist/operations.js, dist/operations.d.ts)', async () => {
    // Resolved by name through package.json "exports", as a user's project resolves it (built by global setup).
    const entry = 'combine';
    const mod = (await import(entry)) as { defineOperation: (d: unknown) => unknown };
    expect(mod.defineOperation(valid)).toBe(valid);
    const file = join(ROOT, 'test', '.typecheck-operation.ts');
    const source = `import { defineOperation } from 'combine';
export default defineOperation<{ project_id: string }, { headline: string }, { headline: string }>({
  name: 'x', description: 'd', input: { type: 'object' },
  identity: (i) => ({ space_type: 'project', space_id: i.project_id, target_doc_type: 'notes', target_id: 'all' }),
  lockScope: (i) => i.project_id, target: (i) => ({ project_id: i.project_id, doc_type: 'notes' }),
  prompt: ({ input, project }) => ({ messages: [{ role: 'user', content: input.project_id + project.name }] }),
  output: { type: 'object' },
  apply: ({ answer, current }) => ({ content: { headline: answer.headline + (current?.headline ?? '') }, summary: {} }),
});
const wrong = defineOperation({ name: 'y', description: 'd', input: {}, identity: () => ({ space_type: 1 }) });`;
    const host = ts.createCompilerHost({});
    const original = host.getSourceFile;
    host.getSourceFile = (name, v) => (name === file ? ts.createSourceFile(name, source, v) : original(name, v));
    const program = ts.createProgram(
      [file],
      { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, strict: true, noEmit: true, types: [] },
      host,
    );
    const errors = ts
      .getPreEmitDiagnostics(program)
      .map((d) => `${d.start !== undefined ? source.slice(0, d.start).split('\n').length : 0}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
    // The well-typed definition compiles; the wrong one is caught on its line.
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.every((e) => e.startsWith('10:'))).toBe(true);
  });
});

describe('code outside the built-ins', () => {
  it('never names a built-in operation (the CLI shorthands and built-in folders may)', async () => {
    const src = join(ROOT, 'src');
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const f of readdirSync(dir)) {
        const p = join(dir, f);
        if (statSync(p).isDirectory()) walk(p);
        else if (p.endsWith('.ts')) files.push(p);
      }
    };
    walk(src);
    const naming = files.filter(
      (f) =>
        !relative(src, f).startsWith('operations/builtin/') && /STORY_GENERATE|PROJECT_BRIEFING|story_generate|project_briefing/.test(readFileSync(f, 'utf8')),
    );
    expect(naming.map((f) => relative(ROOT, f))).toEqual([]);
  });
});
