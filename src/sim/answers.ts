/**
 * The simulator's answers: for any operation, a valid, deterministic answer generated from the output
 * JSON Schema the request carries (its response format), so users' operations run offline; for the
 * built-ins, the richer answers their folders provide. The same request always gets the same answer.
 * Also the two broken answers fault injection needs: one that fails the schema, one that is not JSON.
 */
import { createHash } from 'node:crypto';
import { SIMULATED_ANSWERS } from '../operations/builtin/index.js';

type Schema = Record<string, any>;

/** mulberry32: a tiny seeded PRNG, so answers and fault sequences repeat across runs. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Seeded from text: the same text, the same sequence. */
function generatorFor(text: string): () => number {
  return seeded(createHash('sha256').update(text).digest().readUInt32LE(0));
}

const WORDS = ['clear', 'steady', 'careful', 'simple', 'reliable', 'useful', 'measured', 'complete'];

function humanize(name: string): string {
  const words = name.replace(/[_-]+/g, ' ').trim();
  return words === '' ? 'Value' : words[0]!.toUpperCase() + words.slice(1);
}

interface Context {
  random: () => number;
  /** What the request is about: the first line of its last user message. */
  subject: string;
}

function typeOf(schema: Schema): string {
  const t = Array.isArray(schema.type) ? schema.type.find((x: string) => x !== 'null') : schema.type;
  if (typeof t === 'string') return t;
  if (schema.properties) return 'object';
  if (schema.items) return 'array';
  return 'string';
}

function text(schema: Schema, name: string, index: number, ctx: Context): string {
  const i = index + 1;
  switch (schema.format) {
    case 'date':
      return `2026-01-${String(1 + Math.floor(ctx.random() * 28)).padStart(2, '0')}`;
    case 'date-time':
      return `2026-01-${String(1 + Math.floor(ctx.random() * 28)).padStart(2, '0')}T08:00:00Z`;
    case 'email':
      return `user${i}@example.com`;
    case 'uri':
    case 'url':
      return `https://example.com/${i}`;
    case 'uuid':
      return `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
  }
  const word = WORDS[Math.floor(ctx.random() * WORDS.length)]!;
  let s = `${humanize(name)} ${i}: a ${word} note on ${ctx.subject}`;
  if (typeof schema.maxLength === 'number') s = s.slice(0, schema.maxLength);
  if (typeof schema.minLength === 'number' && s.length < schema.minLength) s = s.padEnd(schema.minLength, '.');
  return s;
}

function number(schema: Schema, integer: boolean, ctx: Context): number {
  const min = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 1);
  const max = schema.maximum ?? (schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - 1 : min + 9);
  const v = min + ctx.random() * Math.max(0, max - min);
  return integer ? Math.min(max, Math.max(min, Math.round(v))) : Math.round(v * 100) / 100;
}

function generate(schema: Schema, name: string, index: number, ctx: Context, depth: number): unknown {
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[Math.floor(ctx.random() * schema.enum.length)];
  const branch = schema.anyOf?.[0] ?? schema.oneOf?.[0] ?? schema.allOf?.[0];
  if (branch && !schema.type && !schema.properties) return generate(branch, name, index, ctx, depth);
  switch (typeOf(schema)) {
    case 'object': {
      const out: Record<string, unknown> = {};
      if (depth > 8) return out;
      for (const [key, sub] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) out[key] = generate(sub, key, index, ctx, depth + 1);
      return out;
    }
    case 'array': {
      if (depth > 8) return [];
      const min = schema.minItems ?? 1;
      const max = schema.maxItems ?? min + 3;
      const n = Math.max(min, Math.min(max, 2 + Math.floor(ctx.random() * 3)));
      const items = (schema.items ?? {}) as Schema;
      const singular = name.endsWith('s') ? name.slice(0, -1) : name;
      return Array.from({ length: n }, (_, i) => generate(items, singular, i, ctx, depth + 1));
    }
    case 'integer':
      return number(schema, true, ctx);
    case 'number':
      return number(schema, false, ctx);
    case 'boolean':
      return ctx.random() < 0.5;
    case 'null':
      return null;
    default:
      return text(schema, name, index, ctx);
  }
}

/** A valid answer to `schema`, the same for the same request text. */
export function answerFromSchema(schema: Schema, requestText: string, subject: string): unknown {
  return generate(schema, 'answer', 0, { random: generatorFor(requestText), subject }, 0);
}

function breakObject(value: Record<string, unknown>, schema: Schema): Record<string, unknown> {
  const required = (schema.required ?? []) as string[];
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const sub = properties[key] ?? {};
    const t = typeOf(sub);
    if (t === 'array' && Array.isArray(v) && typeOf(sub.items ?? {}) === 'object') {
      out[key] = v.map((item) => (typeof item === 'object' && item !== null ? breakObject(item as Record<string, unknown>, sub.items) : item));
    } else if (t === 'array') {
      out[key] = 'not-a-list';
    } else if (!(t === 'string' && required.indexOf(key) > 0)) {
      out[key] = v; // a required text field other than the first is left out
    }
  }
  return out;
}

/**
 * Breaks a valid answer against its schema the way models do: required fields left out and lists
 * given as text, in nested objects too. Whatever the schema, the result is invalid.
 */
export function schemaInvalid(answer: unknown, schema: Schema): unknown {
  if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) return typeof answer === 'string' ? 42 : 'not-valid';
  const broken = breakObject(answer as Record<string, unknown>, schema);
  if (JSON.stringify(broken) !== JSON.stringify(answer)) return broken;
  const first = ((schema.required ?? []) as string[])[0] ?? Object.keys(answer)[0];
  if (first === undefined) return 'not-an-object';
  return { ...answer, [first]: typeof (answer as Record<string, unknown>)[first] === 'string' ? 42 : 'not-text' };
}

export interface SimRequest {
  schemaName: string | null;
  schema: Schema | null;
  messages: { role: string; content: string }[];
}

/**
 * The schema an answer must match: the response format's, or — when the engine asks without one
 * (`provider.response_format` json_object or none) — the one written into the system message.
 */
function schemaOf(req: SimRequest, text: string): Schema | null {
  if (req.schema) return req.schema;
  const written = /must match this JSON schema:\n(.+)$/m.exec(text)?.[1];
  if (!written) return null;
  try {
    return JSON.parse(written) as Schema;
  } catch {
    return null;
  }
}

/** The answer's message content for a request (a repair gets the same answer as its original). */
export function simulatedContent(req: SimRequest, fault: 'schema_invalid' | 'not_json' | null): string {
  // The conversation before any repair turn: repairs append an assistant answer and the errors.
  const firstAssistant = req.messages.findIndex((m) => m.role === 'assistant');
  const original = firstAssistant === -1 ? req.messages : req.messages.slice(0, firstAssistant);
  const text = original.map((m) => m.content).join('\n');
  const schema = schemaOf(req, text) ?? { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] };
  const builtin = req.schemaName ? SIMULATED_ANSWERS[req.schemaName] : undefined;
  const lastUser = [...original].reverse().find((m) => m.role === 'user')?.content ?? '';
  const subject =
    lastUser
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim()
      .slice(0, 60) ?? 'the request';
  const answer = builtin ? builtin(text) : answerFromSchema(schema, text, subject);
  if (fault === 'schema_invalid') return JSON.stringify(schemaInvalid(answer, schema));
  if (fault === 'not_json') return `Here is the answer: ${JSON.stringify(answer).slice(0, 200)}`;
  return JSON.stringify(answer);
}

/** The answer with `text` appended to its first string (deepest first field): for echo faults. */
export function echoInAnswer(answer: unknown, text: string): unknown {
  let done = false;
  const walk = (v: unknown): unknown => {
    if (done) return v;
    if (typeof v === 'string') {
      done = true;
      return `${v} ${text}`;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  const out = walk(answer);
  return done ? out : { answer: out, echo: text };
}
