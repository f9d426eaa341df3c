/** The public JSON shapes of `combine operations` and `combine operations show` (stable: add fields, never rename). */
import type { Operation } from '../../operations/registry.js';

export interface OperationSummaryView {
  name: string;
  description: string;
  /** `builtin`, or the module file it was loaded from. */
  source: string;
  /** The logical model name. */
  model: string;
}

export function operationSummaryView(op: Operation): OperationSummaryView {
  return { name: op.name, description: op.description, source: op.source, model: op.model };
}

/** Everything a caller needs to use the operation: schemas, identity format, defaults as configured. */
export function operationDetailView(op: Operation) {
  const d = op.definition;
  return {
    ...operationSummaryView(op),
    /** `call`: one model call per request; `orchestration`: one `child` thread per input `children` returns. */
    role: op.fansOut ? ('orchestration' as const) : ('call' as const),
    child: d.child ?? null,
    identity: `${op.name}:{space_type}:{space_id}:{target_doc_type}:{target_id}`,
    input: d.input,
    output: d.output ?? null,
    provider_model: op.fansOut ? null : op.params.model,
    /** config `operations.<name>.on_invalid.escalate_to`: the logical model an answer that fails the schema gets one more call to. */
    escalate_to: op.escalateTo,
    priority: op.priority ?? (op.fansOut ? 'bulk' : 'interactive'),
    retry: { max_attempts: op.policy.maxAttempts, base_ms: op.policy.baseMs, cap_ms: op.policy.capMs, repair_attempts: op.policy.repairAttempts },
    rules: d.rules ? { schema: d.rules.schema, configured: op.rules } : null,
  };
}
export type OperationDetailView = ReturnType<typeof operationDetailView>;
