/**
 * The canary: a synthetic work item that goes through the whole pipeline — claim, prompt recorded,
 * answer recorded, validated, applied to a document under a lock, ledger — like any user's request,
 * but on a built-in zero-cost provider (no paid call, no charge, no budget) and in the daemon's own
 * project (never in users' thread lists, usage or budgets). It is an operation like the others; it is
 * left out of `combine operations`, and `combine run combine_canary` runs one by hand.
 */
import type { OperationDefinition } from '../../operations/api.js';
import { validateDefinition, type ValidDefinition } from '../../operations/validate.js';
import { SYSTEM_PROJECT_ID } from '../../domain/project.js';
import type { Provider, RawResponse } from '../engine/provider.js';
import { getProject, insertProject } from '../../db/projects.js';
import type { OperationRegistry } from '../../operations/registry.js';
import type { CommandResult } from '../services/commands.js';
import type { Tx } from '../engine/tx.js';
import { submitOperation } from '../services/submit.js';
import { childContext, formatTraceparent } from '../../core/trace-context.js';

import { CANARY_ENDPOINT, CANARY_MODEL, CANARY_OPERATION, CANARY_PROVIDER_MODEL } from './names.js';

const definition: OperationDefinition<Record<string, never>, { ok: true }> = {
  name: CANARY_OPERATION,
  description: "the daemon's own pipeline check, on a built-in zero-cost provider",
  input: { type: 'object', properties: {}, additionalProperties: false },
  identity: () => ({ space_type: 'system', space_id: SYSTEM_PROJECT_ID, target_doc_type: 'canary', target_id: 'pipeline' }),
  lockScope: () => 'system:canary',
  target: () => ({ project_id: SYSTEM_PROJECT_ID, doc_type: 'canary' }),
  prompt: () => ({ messages: [{ role: 'user', content: 'Pipeline check: answer {"ok": true}.' }] }),
  output: { type: 'object', properties: { ok: { const: true } }, required: ['ok'] },
  apply: ({ current, provenance }) => {
    const runs = ((current as { runs?: number } | null)?.runs ?? 0) + 1;
    return { content: { runs, last_thread_id: provenance.thread_id, last_at: new Date(provenance.at).toISOString() }, summary: { runs } };
  },
  model: CANARY_MODEL,
  priority: 'interactive',
};

export function canaryDefinition(): ValidDefinition {
  return validateDefinition(definition, 'internal');
}

/** Answers every request at once with `{"ok": true}` and zero usage: nothing leaves the process, nothing is paid. */
export function canaryProvider(): Provider {
  const bodyText = JSON.stringify({
    id: 'chatcmpl-canary',
    object: 'chat.completion',
    model: CANARY_PROVIDER_MODEL,
    choices: [{ index: 0, message: { role: 'assistant', content: '{"ok":true}' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  });
  return {
    endpoint: CANARY_ENDPOINT,
    send: async (): Promise<RawResponse> => ({ httpStatus: 200, bodyText, requestId: null, rateLimit: {} }),
  };
}

/** Requests one canary run, creating the daemon's own project the first time; never refused for a full queue. */
export async function submitCanary(tx: Tx, operations: OperationRegistry): Promise<CommandResult> {
  if (!(await getProject(tx.sql, SYSTEM_PROJECT_ID))) await insertProject(tx.sql, { id: SYSTEM_PROJECT_ID, name: 'combine (system)', created_at: tx.now });
  return await submitOperation(
    tx,
    operations,
    CANARY_OPERATION,
    {},
    {
      force: true,
      maxQueued: Number.MAX_SAFE_INTEGER,
      deadlineAt: null,
      createdBy: 'canary',
      traceparent: formatTraceparent(childContext(null)),
    },
  );
}
