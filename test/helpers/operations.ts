/**
 * The built-in operations outside a daemon (their registry and their requests from fixture state), and
 * the example of a user's own operation installed into a home.
 */
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ModelParams, SchemaChatRequest } from '../../src/domain/prompts.js';
import { DEFAULT_RETRY_POLICY } from '../../src/domain/retry.js';
import type { ProjectThreads, ThreadFact } from '../../src/operations/api.js';
import { builtinDefinitions } from '../../src/operations/loader.js';
import { OperationRegistry, type OperationSettings } from '../../src/operations/registry.js';
import { checkAnswer, renderRequest } from '../../src/operations/runtime.js';
import { validateDefinition } from '../../src/operations/validate.js';

/** examples/operations/release_notes.mjs: one file, no import; a keyed document per project and version. */
export const EXAMPLE_OPERATION = fileURLToPath(new URL('../../examples/operations/release_notes.mjs', import.meta.url));
export const EXAMPLE_INPUT = { project_id: 'acme', version: '1.2.0', changes: ['Fix login on Safari', 'Export orders as CSV'] };

/** Copies the example into `home`/operations/, where the daemon loads it at start. */
export function installExampleOperation(home: string): void {
  mkdirSync(join(home, 'operations'), { recursive: true });
  copyFileSync(EXAMPLE_OPERATION, join(home, 'operations', 'release_notes.mjs'));
}

/**
 * `outline`: a document stored in parts keyed by the answer's section names (a part's key is a raw text
 * column). `apply` rewrites the keys as the input's optional `mode` says, from the module's own code
 * (the answer and input hold no NUL): `nul` appends a U+0000, `refused` prefixes `refused:`.
 */
const OUTLINE_OPERATION = `export default {
  name: 'outline',
  description: 'An outline of a project, one part per section',
  input: { type: 'object', properties: { project_id: { type: 'string' }, mode: { type: 'string' } }, required: ['project_id'] },
  identity: (i) => ({ space_type: 'project', space_id: i.project_id, target_doc_type: 'outline', target_id: 'all' }),
  lockScope: (i) => 'outline:' + i.project_id,
  target: (i) => ({ project_id: i.project_id, doc_type: 'outline' }),
  parts: { field: 'sections', key: 'name' },
  prompt: ({ project }) => ({ messages: [{ role: 'user', content: 'Outline of ' + project.name }] }),
  output: {
    type: 'object',
    properties: { sections: { type: 'array', minItems: 1, items: { type: 'object', properties: { name: { type: 'string' }, text: { type: 'string' } }, required: ['name', 'text'] } } },
    required: ['sections'],
  },
  apply: ({ answer, input }) => ({
    content: { sections: answer.sections.map((s) => ({ ...s, name: input.mode === 'nul' ? s.name + String.fromCharCode(0) : input.mode === 'refused' ? 'refused:' + s.name : s.name })) },
    summary: { sections: answer.sections.length },
  }),
};
`;

/** Writes `outline` (OUTLINE_OPERATION) into `home`/operations/, where the daemon loads it at start. */
export function installOutlineOperation(home: string): void {
  mkdirSync(join(home, 'operations'), { recursive: true });
  writeFileSync(join(home, 'operations', 'outline.mjs'), OUTLINE_OPERATION);
}

export const PARAMS: ModelParams = { model: 'gpt-4o-mini', temperature: 0.2, maxTokens: 2048 };

export function builtinRegistry(params: ModelParams = PARAMS, operations: OperationSettings['operations'] = {}): OperationRegistry {
  return new OperationRegistry(builtinDefinitions(), { retry: DEFAULT_RETRY_POLICY, params, models: {}, operations, configSource: 'test' });
}

const noThreads: ProjectThreads = { countByStatus: () => ({}), list: () => [] };

interface Fixture {
  project: { id: string; name: string };
  documents?: Record<string, unknown>;
  threads?: ProjectThreads;
}

/** The exact request a built-in renders for `input` against the fixture's documents and threads. */
export function builtinRequest(name: string, input: Record<string, unknown>, f: Fixture, params: ModelParams = PARAMS): SchemaChatRequest {
  const op = builtinRegistry(params).require(name);
  const documents = { get: (docType: string) => f.documents?.[docType] ?? null };
  return renderRequest(op, { input, documents, project: f.project, threads: f.threads ?? noThreads });
}

export function storyRequest(
  project: { id: string; name: string },
  epic: { id: string; title: string; description: string },
  params: ModelParams = PARAMS,
): SchemaChatRequest {
  return builtinRequest(
    'story_generate_epic',
    { project_id: project.id, epic_id: epic.id },
    { project, documents: { epic_architecture: { epics: [epic] } } },
    params,
  );
}

/** Threads as the briefing's prompt reads them. */
export function threadsOf(counts: Record<string, number>, failed: ThreadFact[], running: ThreadFact[]): ProjectThreads {
  return { countByStatus: () => counts, list: (o) => (o.statuses.includes('failed') ? failed : running) };
}

export function checkBuiltinAnswer(name: string, content: string, operations: OperationSettings['operations'] = {}) {
  return checkAnswer(builtinRegistry(PARAMS, operations).require(name), content);
}

/**
 * The built-ins and `global_note`: one note per project, every one written under the one lock scope
 * `notes:global` whatever the project (a scope shared across projects: engine-claim-round, on SQLite and Postgres).
 */
export function registryWithSharedScope(settings: OperationSettings): OperationRegistry {
  const shared = validateDefinition(
    {
      name: 'global_note',
      description: 'one note per project, written one at a time',
      input: { type: 'object', properties: { project_id: { type: 'string' } }, required: ['project_id'] },
      identity: (i: { project_id: string }) => ({ space_type: 'project', space_id: i.project_id, target_doc_type: 'note', target_id: 'one' }),
      lockScope: () => 'notes:global',
      target: (i: { project_id: string }) => ({ project_id: i.project_id, doc_type: 'note' }),
      prompt: () => ({ messages: [{ role: 'user', content: 'Write a note' }] }),
      output: { type: 'object', properties: { note: { type: 'string' } } },
      apply: ({ answer }: { answer: unknown }) => ({ content: answer, summary: {} }),
    },
    'test',
  );
  return new OperationRegistry([...builtinDefinitions(), shared], settings);
}
