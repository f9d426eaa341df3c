/**
 * Validation of an operation definition, before anything runs it: every field is checked and both
 * schemas are compiled once. An error names the module's file and the field, so a bad module stops
 * the daemon at start with a message that says what to fix.
 */
import { parseDurationMs } from '../domain/duration.js';
import type { JsonSchema, OperationDefinition, Priority, RetryOptions } from './api.js';
import { compileSchema, type SchemaCheck } from './json-schema.js';
import { OperationDefinitionError } from '../core/errors.js';

export const PRIORITIES: readonly Priority[] = ['interactive', 'bulk', 'scheduled'];

/** snake_case: it is the thread kind, and the first part of every idempotency key. */
const NAME = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;
/** Config `operations.modules` lists module files: no operation may be called that. */
const RESERVED_NAMES = new Set(['modules']);

const FIELDS = new Set([
  'name',
  'description',
  'input',
  'identity',
  'lockScope',
  'target',
  'prompt',
  'output',
  'apply',
  'children',
  'child',
  'model',
  'priority',
  'retry',
  'rules',
  'parts',
]);

/** A definition that passed validation, with its schemas compiled. */
export interface ValidDefinition {
  definition: OperationDefinition;
  /** `builtin`, or the module's file. */
  source: string;
  checkInput: SchemaCheck;
  /** Absent for an orchestration (it makes no call). */
  checkOutput: SchemaCheck | null;
  checkRules: SchemaCheck | null;
  retry: { maxAttempts?: number; baseMs?: number; capMs?: number };
}

type Fields = Record<string, unknown>;

function compileObjectSchema(source: string, field: string, schema: unknown): SchemaCheck {
  const compiled = compileSchema(schema);
  if (!compiled.ok) throw new OperationDefinitionError(source, field, compiled.error);
  if ((schema as JsonSchema).type !== 'object') throw new OperationDefinitionError(source, field, 'must describe a JSON object (type: "object")');
  return compiled.check;
}

function requireFunction(source: string, d: Fields, field: string): void {
  if (typeof d[field] !== 'function') throw new OperationDefinitionError(source, field, `must be a function (got ${describe(d[field])})`);
}

function forbid(source: string, d: Fields, fields: string[], why: string): void {
  for (const f of fields) if (d[f] !== undefined) throw new OperationDefinitionError(source, f, why);
}

function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  return Array.isArray(v) ? 'an array' : typeof v;
}

function checkRetry(source: string, retry: unknown): ValidDefinition['retry'] {
  if (retry === undefined) return {};
  if (typeof retry !== 'object' || retry === null || Array.isArray(retry))
    throw new OperationDefinitionError(source, 'retry', 'must be an object {max_attempts, base, cap}');
  const r = retry as RetryOptions & Fields;
  for (const k of Object.keys(r))
    if (!['max_attempts', 'base', 'cap'].includes(k))
      throw new OperationDefinitionError(source, `retry.${k}`, 'is not a retry option (max_attempts, base, cap)');
  const out: ValidDefinition['retry'] = {};
  if (r.max_attempts !== undefined) {
    if (!Number.isInteger(r.max_attempts) || r.max_attempts < 1 || r.max_attempts > 100)
      throw new OperationDefinitionError(source, 'retry.max_attempts', 'must be an integer from 1 to 100');
    out.maxAttempts = r.max_attempts;
  }
  for (const k of ['base', 'cap'] as const) {
    if (r[k] === undefined) continue;
    const ms = typeof r[k] === 'number' || typeof r[k] === 'string' ? parseDurationMs(r[k]) : null;
    if (ms === null) throw new OperationDefinitionError(source, `retry.${k}`, `"${String(r[k])}" is not a duration (milliseconds, or e.g. "2s")`);
    out[k === 'base' ? 'baseMs' : 'capMs'] = ms;
  }
  return out;
}

function checkParts(source: string, parts: unknown): void {
  if (parts === undefined) return;
  const p = parts as Fields;
  if (typeof p !== 'object' || p === null || Array.isArray(p)) throw new OperationDefinitionError(source, 'parts', 'must be an object {field, key}');
  for (const k of Object.keys(p))
    if (k !== 'field' && k !== 'key') throw new OperationDefinitionError(source, `parts.${k}`, 'is not a parts option (field, key)');
  for (const k of ['field', 'key'] as const) {
    if (typeof p[k] !== 'string' || p[k] === '' || (p[k] as string).length > 64) {
      throw new OperationDefinitionError(source, `parts.${k}`, 'must be a property name (a non-empty string of at most 64 characters)');
    }
  }
}

/** Checks one definition on its own (the registry checks names across definitions and `child`). */
export function validateDefinition(value: unknown, source: string): ValidDefinition {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new OperationDefinitionError(source, 'default export', `must be an operation definition object (got ${describe(value)})`);
  }
  const d = value as Fields;
  for (const k of Object.keys(d)) if (!FIELDS.has(k)) throw new OperationDefinitionError(source, k, 'is not a field of an operation definition');
  if (typeof d.name !== 'string' || !NAME.test(d.name) || d.name.length > 64) {
    throw new OperationDefinitionError(source, 'name', `must be a snake_case name of at most 64 characters (got ${JSON.stringify(d.name) ?? 'nothing'})`);
  }
  if (RESERVED_NAMES.has(d.name)) throw new OperationDefinitionError(source, 'name', `"${d.name}" is reserved`);
  if (typeof d.description !== 'string' || d.description.trim() === '' || d.description.includes('\n') || d.description.length > 200) {
    throw new OperationDefinitionError(source, 'description', 'must be one non-empty line of at most 200 characters');
  }
  const checkInput = compileObjectSchema(source, 'input', d.input);
  for (const f of ['identity', 'lockScope', 'target']) requireFunction(source, d, f);
  let checkOutput: SchemaCheck | null = null;
  let checkRules: SchemaCheck | null = null;
  if (d.children !== undefined || d.child !== undefined) {
    requireFunction(source, d, 'children');
    if (typeof d.child !== 'string' || d.child === '') throw new OperationDefinitionError(source, 'child', 'must name the operation each child runs');
    forbid(source, d, ['prompt', 'output', 'apply', 'rules', 'parts'], 'an operation with children makes no call of its own: remove it');
  } else {
    requireFunction(source, d, 'prompt');
    checkOutput = compileObjectSchema(source, 'output', d.output);
    requireFunction(source, d, 'apply');
    if (d.rules !== undefined) {
      const rules = d.rules as Fields;
      if (typeof rules !== 'object' || rules === null) throw new OperationDefinitionError(source, 'rules', 'must be an object {schema, check}');
      checkRules = compileObjectSchema(source, 'rules.schema', rules.schema);
      if (typeof rules.check !== 'function') throw new OperationDefinitionError(source, 'rules.check', 'must be a function');
    }
  }
  checkParts(source, d.parts);
  if (d.model !== undefined && (typeof d.model !== 'string' || d.model.trim() === '' || d.model.length > 64)) {
    throw new OperationDefinitionError(source, 'model', 'must be a logical model name (a non-empty string)');
  }
  if (d.priority !== undefined && !PRIORITIES.includes(d.priority as Priority)) {
    throw new OperationDefinitionError(source, 'priority', `must be one of ${PRIORITIES.join(', ')}`);
  }
  return { definition: d as unknown as OperationDefinition, source, checkInput, checkOutput, checkRules, retry: checkRetry(source, d.retry) };
}
