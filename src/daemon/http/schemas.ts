/**
 * The HTTP API's schemas (zod): path, query and body schemas validate every request, and the same
 * objects generate `/openapi.json`. Response schemas describe what the App's views return (the CLI's
 * `--json` shapes); they are loose objects, because shapes grow (fields are added, never removed), and
 * the compile-time checks at the bottom keep them from drifting away from the views.
 */
import { z } from 'zod';
import { THREAD_STATUSES } from '../../domain/states.js';
import type { ThreadView, CommandView } from '../views.js';
import type { Services } from '../services/index.js';

const id = (what: string) => z.string().min(1).max(200).describe(what);
const force = z.boolean().default(false).describe('run again even when an identical request already completed');
const deadlineMs = z.number().int().positive().nullable().default(null).describe('fail unstarted work after this many milliseconds');

// --- requests -------------------------------------------------------------------------------

export const generateEpicBody = z.strictObject({ project_id: id('the project'), epic_id: id('the epic'), force, deadline_ms: deadlineMs });
export const generateAllBody = z.strictObject({ project_id: id('the project'), force, deadline_ms: deadlineMs });
export const noBody = z.strictObject({});
/** `input` is checked by the operation's own JSON Schema (GET /operations/{name}), as `combine run` does. */
export const runBody = z.strictObject({
  input: z.record(z.string(), z.unknown()).describe("the operation's input: an object its input schema accepts (GET /operations/{operation} shows it)"),
  force,
  deadline_ms: deadlineMs,
});

export const threadParams = z.strictObject({ thread_id: id('the thread') });
export const projectParams = z.strictObject({ project_id: id('the project') });
export const documentParams = z.strictObject({ project_id: id('the project'), doc_type: id('the document type, e.g. story_backlog') });
export const scheduleParams = z.strictObject({ schedule_id: id('the schedule') });
export const operationParams = z.strictObject({ operation: id('the operation, as `combine operations` lists it') });

const bool = (what: string) =>
  z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true')
    .describe(what);
const statusList = z
  .string()
  .max(200)
  .transform((v, ctx) => {
    const list = v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const bad = list.filter((s) => !(THREAD_STATUSES as readonly string[]).includes(s));
    if (bad.length > 0) {
      ctx.addIssue({ code: 'custom', message: `"${bad.join(', ')}" is not a thread status (${THREAD_STATUSES.join(', ')})` });
      return z.NEVER;
    }
    return list;
  })
  .describe(`only these statuses, comma-separated (${THREAD_STATUSES.join(', ')})`);
const limit = (max: number, dflt: number) => z.coerce.number().int().min(1).max(max).default(dflt).describe(`at most this many (1–${max})`);

const threadFilters = {
  active: bool('only open and running threads'),
  status: statusList.optional(),
  kind: id('only threads of this kind (an operation name)').optional(),
  parent_thread_id: id("only this orchestration's children").optional(),
  cursor: id('the thread_id of the last thread of the previous page: lists the threads after it').optional(),
  limit: limit(1000, 100),
};
export const projectThreadsQuery = z.strictObject(threadFilters);
export const threadsQuery = z.strictObject({ ...threadFilters, project_id: id('only this project').optional() });
export const documentQuery = z.strictObject({ key: id('the key of a keyed document (a briefing: its date)').optional() });
export const usageQuery = z.strictObject({ project_id: id('only this project').optional() });
export const schedulesQuery = z.strictObject({ all: bool('include removed schedules') });
export const runsQuery = z.strictObject({ limit: limit(1000, 50) });

// --- responses ------------------------------------------------------------------------------

/**
 * Named response schemas: `/openapi.json` lists them under components.schemas. The id goes into zod's
 * global registry (with the fields' descriptions), which is what `z.toJSONSchema` reads.
 */
export const componentNames = new Set<string>();
const named = <T extends z.ZodType>(name: string, schema: T): T => {
  componentNames.add(name);
  return schema.meta({ id: name }) as T;
};
const iso = z.string().describe('ISO 8601 time, UTC');

// Registered as a component (every error answer refers to it), never read by name here.
named(
  'Problem',
  z.looseObject({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string().describe('BAD_REQUEST, NOT_FOUND, CONFLICT, QUEUE_FULL, LOCKED, UNAUTHORIZED, FORBIDDEN, PAYLOAD_TOO_LARGE, …'),
    errors: z
      .array(z.object({ field: z.string(), message: z.string() }))
      .optional()
      .describe('for 400: each bad field'),
  }),
);

export const commandSchema = named(
  'CommandResult',
  z.looseObject({
    thread_id: z.string(),
    status: z.string(),
    deduplicated: z.boolean().describe('true: an identical request was already active or done'),
    superseded_thread_id: z.string().optional().describe('a forced request replaced this thread, whose call had not started (it ends canceled, SUPERSEDED)'),
  }),
);

const usageSchema = named(
  'Usage',
  z.looseObject({
    calls: z.number(),
    prompt_tokens: z.number(),
    completion_tokens: z.number(),
    total_tokens: z.number(),
    cost_usd: z.number().nullable().describe('null ("unpriced") when none of the calls had a price'),
    wasted_calls: z.number(),
    wasted_tokens: z.number(),
    wasted_cost_usd: z.number().nullable(),
    in_doubt_calls: z.number(),
    in_doubt_tokens: z.number(),
    in_doubt_cost_usd: z.number().nullable(),
    reserved_calls: z.number(),
    reserved_tokens: z.number(),
    unpriced_calls: z.number().describe('calls whose model had no price: the cost leaves them out'),
  }),
);

export const threadSchema = named(
  'Thread',
  z.looseObject({
    thread_id: z.string(),
    kind: z.string(),
    status: z.string().describe(THREAD_STATUSES.join(', ')),
    target_ref: z.looseObject({ doc_type: z.string(), project_id: z.string(), epic_id: z.string().optional(), date: z.string().optional() }),
    parent_thread_id: z.string().nullable(),
    created_at: iso,
    closed_at: iso.nullable(),
    child_summary: z.record(z.string(), z.number()).nullable().describe("an orchestration's children, counted by status"),
    usage: usageSchema,
  }),
);

/** `GET /threads/{id}`: the thread, plus what it waits for (`thread --json`). */
export const threadDetailSchema = named(
  'ThreadDetail',
  threadSchema.extend({
    in_doubt: z
      .looseObject({ work_item_id: z.string(), attempt: z.number().int(), code: z.string().nullable(), since: iso.nullable(), message: z.string().nullable() })
      .nullable()
      .describe('a call held in doubt (interrupted: hold): `retry` pays again, `cancel` gives up'),
    hold: z
      .looseObject({ work_item_id: z.string(), until: iso, reason: z.enum(['backoff', 'rate_limit']), error_code: z.string().nullable() })
      .nullable()
      .describe('a queued item held back until a time (backoff, or its model held after a 429)'),
    traceparent: z
      .string()
      .nullable()
      .describe("the W3C trace context of the command that created the thread (its calls' `traceparent` headers are in this trace)"),
    models: z
      .array(z.looseObject({ logical_model: z.string(), model: z.string(), calls: z.number().int(), total_tokens: z.number(), cost_usd: z.number() }))
      .describe('the logical and real models its calls used, with their calls, tokens and cost'),
    escalated: z.boolean().describe('an answer that failed the schema was sent to a stronger model (on_invalid.escalate_to)'),
    escalation: z
      .looseObject({ logical_model: z.string(), model: z.string(), calls: z.number().int(), total_tokens: z.number(), cost_usd: z.number() })
      .nullable()
      .describe('what the escalation calls cost'),
  }),
);

export const ledgerEntrySchema = named(
  'LedgerEntry',
  z.looseObject({
    seq: z.number().int(),
    thread_id: z.string(),
    work_item_id: z.string().nullable(),
    entry_type: z.string().describe('prompt, response, parse_report, mutation_report, error'),
    attempt: z.number().int().nullable(),
    created_at: iso.nullable(),
    summary: z.string(),
    payload: z.record(z.string(), z.unknown()),
    prev_hash: z.string(),
    hash: z.string(),
    cost_usd: z.number().nullable().optional().describe('response entries: the settled cost of the call (null when unpriced)'),
  }),
);

export const projectSchema = named(
  'Project',
  z.looseObject({
    project_id: z.string(),
    name: z.string(),
    created_at: iso.nullable(),
    architecture_version: z.number().int().nullable(),
    epics: z.array(z.looseObject({ id: z.string(), title: z.string(), description: z.string() })),
  }),
);

export const documentSchema = named(
  'Document',
  z.looseObject({
    project_id: z.string(),
    doc_type: z.string(),
    key: z.string().nullable(),
    version: z.number().int(),
    content: z.unknown(),
    updated_at: iso.nullable(),
  }),
);

export const documentHeadSchema = named(
  'DocumentHead',
  z.looseObject({ project_id: z.string(), doc_type: z.string(), key: z.string().nullable(), version: z.number().int(), updated_at: iso.nullable() }),
);

export const operationSummarySchema = named(
  'OperationSummary',
  z.looseObject({
    name: z.string(),
    description: z.string(),
    source: z.string().describe('`builtin`, or the module file it was loaded from'),
    model: z.string().describe('the logical model name'),
  }),
);

/** `GET /operations/{name}` (as `combine operations show --json`): what a caller needs to run it. */
export const operationDetailSchema = named(
  'OperationDetail',
  operationSummarySchema.extend({
    role: z.enum(['call', 'orchestration']),
    child: z.string().nullable(),
    identity: z.string(),
    input: z.record(z.string(), z.unknown()).describe('the JSON Schema of `input` (POST /commands/run/{operation})'),
    output: z.record(z.string(), z.unknown()).nullable().describe("the JSON Schema of the model's answer (null for an orchestration)"),
    provider_model: z.string().nullable(),
    priority: z.string(),
    retry: z.looseObject({ max_attempts: z.number().int(), base_ms: z.number(), cap_ms: z.number(), repair_attempts: z.number().int() }),
    rules: z.looseObject({ schema: z.unknown(), configured: z.unknown() }).nullable(),
  }),
);

/** Shapes owned by other modules, documented as objects (their fields are listed in the README). */
export const objectSchema = (name: string, description: string) => named(name, z.looseObject({}).describe(description));
export const usageReportSchema = objectSchema('UsageReport', 'as `combine usage --json`: usage per project and UTC day, totals and budgets');
export const healthSchema = named(
  'Health',
  z.looseObject({
    live: z.boolean(),
    ready: z.boolean(),
    status: z.enum(['ready', 'unready']),
    checks: z.record(z.string(), z.boolean()),
    breakers: z.record(z.string(), z.unknown()),
  }),
);
export const scheduleSchema = objectSchema('Schedule', 'as `combine schedule list --json`');
export const runSchema = objectSchema('ScheduleRun', 'as `combine schedule runs --json`');

// Compile-time guard: each view must still have the fields (and types) of the schema that documents it.
type Known<T> = T extends readonly unknown[] ? Known<T[number]>[] : T extends object ? { [K in keyof T as string extends K ? never : K]: Known<T[K]> } : T;
type Documents<View extends Known<z.infer<Schema>>, Schema extends z.ZodType> = [View, Schema];
/** @public Read by the compiler only: it fails the build when a view and its schema drift apart. */
export type ViewsMatchSchemas = [
  Documents<ThreadView, typeof threadSchema>,
  Documents<CommandView, typeof commandSchema>,
  Documents<Awaited<ReturnType<Services['projects']['get']>>, typeof projectSchema>,
  Documents<Awaited<ReturnType<Services['projects']['document']>>, typeof documentSchema>,
  Documents<Awaited<ReturnType<Services['ledger']['thread']>>[number], typeof ledgerEntrySchema>,
  Documents<ReturnType<Services['threads']['operations']>[number], typeof operationSummarySchema>,
  Documents<ReturnType<Services['threads']['operation']>, typeof operationDetailSchema>,
  Documents<Awaited<ReturnType<Services['projects']['documents']>>[number], typeof documentHeadSchema>,
];
