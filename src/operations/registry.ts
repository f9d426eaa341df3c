/**
 * The operations a daemon runs: validated definitions plus what the configuration decides about each
 * (retry policy, model, answer rules). Built once at start; a name is unique, an orchestration's
 * `child` exists and makes a call, and every `operations.<name>` config entry names a loaded operation
 * and sets only rules it declares. Any violation throws an error naming the file (or config) and field.
 */
import type { ModelParams } from '../domain/prompts.js';
import type { RetryPolicy } from '../domain/retry.js';
import type { OperationDefinition, Priority } from './api.js';
import type { ValidDefinition } from './validate.js';
import { OperationDefinitionError } from '../core/errors.js';
import { UnknownOperationError } from '../core/errors.js';

/** What config.json says about operations (already validated for shape by the config loader). */
export interface OperationSettings {
  /** The global retry policy (defaults, then config `retry`). */
  retry: RetryPolicy;
  /** The configured model and its parameters: the `default` logical model. */
  params: ModelParams;
  /** Logical model name → provider model (config `models`; `default` is `params.model`). */
  models: Record<string, string>;
  /** Config `operations.<name>`: retry overrides, answer rules, the logical model, and the model an invalid answer escalates to. */
  operations: Record<string, { retry?: Partial<RetryPolicy>; validation?: Record<string, unknown>; model?: string; escalateTo?: string }>;
  /** Where config came from, for error messages. */
  configSource: string;
}

export interface Operation {
  name: string;
  description: string;
  source: string;
  definition: OperationDefinition;
  /** An orchestration: a parent thread whose children do the calls. */
  fansOut: boolean;
  /** The logical model name and the provider parameters it resolves to. */
  model: string;
  params: ModelParams;
  /** An answer that fails the schema (after any repairs) gets one call to this logical model; null: dead_letter. */
  escalateTo: string | null;
  policy: RetryPolicy;
  priority: Priority | null;
  /** The rules config sets for this operation ({} when none). */
  rules: Record<string, unknown>;
  checkInput(input: unknown): string[];
  /** Schema, then rules: the violations of an answer, each naming the field. */
  checkAnswer(answer: unknown): string[];
}

function merge(base: RetryPolicy, o: Partial<RetryPolicy> | undefined): RetryPolicy {
  const defined = Object.entries(o ?? {}).filter(([, v]) => v !== undefined);
  return { ...base, ...(Object.fromEntries(defined) as Partial<RetryPolicy>) };
}

/** The provider parameters of a logical model: the configured ones with its model. */
function paramsOf(settings: OperationSettings, logical: string): ModelParams {
  return { ...settings.params, model: logical === 'default' ? settings.params.model : settings.models[logical]! };
}

/** A logical model must be configured: a call to a model nobody named would fail only later, and paid for. */
function checkModel(settings: OperationSettings, logical: string, source: string, field: string): void {
  if (logical === 'default' || settings.models[logical] !== undefined) return;
  // Names with ':' are the daemon's own (the canary's).
  const known = ['default', ...Object.keys(settings.models).filter((m) => m !== 'default' && !m.includes(':'))].join(', ');
  throw new OperationDefinitionError(source, field, `no model "${logical}" is configured (config models has ${known})`);
}

function resolve(v: ValidDefinition, settings: OperationSettings): Operation {
  const d = v.definition;
  const configured = settings.operations[d.name] ?? {};
  const model = configured.model ?? d.model ?? 'default';
  if (configured.model !== undefined) checkModel(settings, model, settings.configSource, `operations.${d.name}.model`);
  else checkModel(settings, model, v.source, 'model');
  const escalateTo = configured.escalateTo ?? null;
  if (escalateTo !== null) checkModel(settings, escalateTo, settings.configSource, `operations.${d.name}.on_invalid.escalate_to`);
  const rules = configured.validation ?? {};
  if (configured.validation !== undefined) {
    const field = `operations.${d.name}.validation`;
    if (!v.checkRules) throw new OperationDefinitionError(settings.configSource, field, `operation ${d.name} (${v.source}) declares no answer rules`);
    const problem = v.checkRules(rules)[0];
    if (problem !== undefined) {
      const [, at, reason] = /^(.*?): (.*)$/.exec(problem) ?? [null, '(root)', problem];
      throw new OperationDefinitionError(
        settings.configSource,
        at === '(root)' ? field : `${field}.${at}`,
        `${reason} (the rules ${d.name} declares: \`combine operations show ${d.name}\`)`,
      );
    }
  }
  const check = d.rules?.check;
  return {
    name: d.name,
    description: d.description,
    source: v.source,
    definition: d,
    fansOut: d.children !== undefined,
    model,
    params: paramsOf(settings, model),
    escalateTo,
    // Precedence: config for this operation, then the definition's own defaults, then the global policy.
    policy: merge(merge(settings.retry, v.retry), configured.retry),
    priority: d.priority ?? null,
    rules,
    checkInput: v.checkInput,
    checkAnswer(answer) {
      const errors = v.checkOutput ? v.checkOutput(answer) : [];
      return errors.length > 0 || !check ? errors : check(answer, rules);
    },
  };
}

export class OperationRegistry {
  private readonly byName = new Map<string, Operation>();
  /** The global policy and model: what a thread of an operation not loaded here falls back to. */
  readonly defaultPolicy: RetryPolicy;
  readonly defaultParams: ModelParams;

  /** The daemon's own operations (the canary): run like any other, left out of `list`. */
  private readonly internal = new Set<string>();

  constructor(
    definitions: readonly ValidDefinition[],
    private readonly settings: OperationSettings,
    internal: readonly ValidDefinition[] = [],
  ) {
    this.defaultPolicy = settings.retry;
    this.defaultParams = settings.params;
    for (const v of internal) this.internal.add(v.definition.name);
    for (const v of [...definitions, ...internal]) {
      const other = this.byName.get(v.definition.name);
      if (other) throw new OperationDefinitionError(v.source, 'name', `"${v.definition.name}" is already defined by ${other.source}`);
      this.byName.set(v.definition.name, resolve(v, settings));
    }
    for (const op of this.byName.values()) {
      if (!op.fansOut) continue;
      const child = this.byName.get(op.definition.child!);
      if (!child) throw new OperationDefinitionError(op.source, 'child', `no operation "${op.definition.child}" is loaded`);
      if (child.fansOut) throw new OperationDefinitionError(op.source, 'child', `"${child.name}" has children itself; a child must make a call`);
    }
    for (const name of Object.keys(settings.operations)) {
      if (!this.byName.has(name))
        throw new OperationDefinitionError(settings.configSource, `operations.${name}`, `no operation "${name}" is loaded (see \`combine operations\`)`);
    }
  }

  /** The provider parameters of any configured logical model (an escalation's). */
  paramsFor(logical: string): ModelParams {
    return paramsOf(this.settings, logical);
  }

  get(name: string): Operation | undefined {
    return this.byName.get(name);
  }

  /** The operation that runs threads of `kind`; throws when none does (a thread of an unloaded module). */
  require(kind: string): Operation {
    const op = this.byName.get(kind);
    if (!op) throw new UnknownOperationError(kind);
    return op;
  }

  policyFor(kind: string): RetryPolicy {
    return this.byName.get(kind)?.policy ?? this.defaultPolicy;
  }

  /** The operations users run (`combine operations`), by name. */
  list(): Operation[] {
    return [...this.byName.values()].filter((op) => !this.internal.has(op.name)).sort((a, b) => a.name.localeCompare(b.name));
  }
}
