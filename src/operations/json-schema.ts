/**
 * JSON Schema validation of operation inputs and answers (ajv, draft-07, with the standard formats).
 * A schema is checked against the meta-schema and compiled once, when its operation is loaded; errors
 * name the field in the same form as the rest of combine (`stories[0].title: must be string`).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import ajvFormats from 'ajv-formats';
import type { JsonSchema } from './api.js';

// ajv-formats is CommonJS: imported from ESM its module object is the plugin, which carries itself as `.default`.
const addFormats = ajvFormats.default;

/**
 * One instance for every operation. `addUsedSchema: false`: two modules may use the same `$id`
 * without clashing; `strict: false`: annotations other tools use (e.g. `x-…`) are allowed, while a
 * schema that breaks the meta-schema is still refused.
 */
const ajv = new Ajv({ allErrors: true, strict: false, addUsedSchema: false });
addFormats(ajv, { mode: 'full' });

export type SchemaCheck = (value: unknown) => string[];

export type CompileResult = { ok: true; check: SchemaCheck } | { ok: false; error: string };

/** `/stories/0/title` → `stories[0].title`; the root is `(root)`. */
function pathOf(pointer: string, child?: string): string {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (child !== undefined) parts.push(child);
  let out = '';
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out === '' ? p : `.${p}`;
  return out === '' ? '(root)' : out;
}

export function describeSchemaErrors(errors: readonly ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => {
    if (e.keyword === 'required') return `${pathOf(e.instancePath, String(e.params.missingProperty))}: is required`;
    if (e.keyword === 'additionalProperties') return `${pathOf(e.instancePath, String(e.params.additionalProperty))}: is not allowed`;
    if (e.keyword === 'enum')
      return `${pathOf(e.instancePath)}: must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    return `${pathOf(e.instancePath)}: ${e.message ?? 'is invalid'}`;
  });
}

/** Checks `schema` against the meta-schema and compiles it; the error says what is wrong with it. */
export function compileSchema(schema: unknown): CompileResult {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) {
    return { ok: false, error: 'must be a JSON Schema object' };
  }
  try {
    JSON.stringify(schema);
  } catch (err) {
    return { ok: false, error: `must be plain JSON (${(err as Error).message})` };
  }
  if (!ajv.validateSchema(schema)) {
    return { ok: false, error: `is not a valid JSON Schema: ${ajv.errorsText(ajv.errors, { dataVar: 'schema' })}` };
  }
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(schema as JsonSchema);
  } catch (err) {
    return { ok: false, error: `is not a valid JSON Schema: ${(err as Error).message}` };
  }
  return { ok: true, check: (value) => (validate(value) ? [] : describeSchemaErrors(validate.errors)) };
}
