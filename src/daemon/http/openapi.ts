/**
 * `/openapi.json`: an OpenAPI 3.1 document generated from the route table — its paths, parameters and
 * bodies from the very zod schemas that validate requests (`io: 'input'`: what a client may send), its
 * answers from the response schemas (`components.schemas`). Nothing here is written by hand per endpoint.
 * The input of `POST /commands/run/{operation}` depends on the operation: each loaded operation's own
 * input JSON Schema (the one that checks it) is a component, and the body's `input` is any of them.
 */
import { z } from 'zod';
import { VERSION } from '../../core/version.js';
import type { Route } from './routes.js';
import { componentNames } from './schemas.js';
import { COOKIE_NAME } from './security.js';

type JsonSchema = Record<string, unknown>;

const REF_PREFIX = '#/components/schemas/';

/** A zod schema as an OpenAPI 3.1 schema object: named schemas become $refs into components. */
function schemaOf(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const named = z.globalRegistry.get(schema)?.id;
  if (named && componentNames.has(named)) return { $ref: `${REF_PREFIX}${named}` };
  const json = z.toJSONSchema(schema, { io, target: 'draft-2020-12', unrepresentable: 'any' }) as JsonSchema;
  delete json.$schema;
  delete json.$defs; // every $def is a named component, listed once under components.schemas
  return JSON.parse(JSON.stringify(json).replaceAll('"#/$defs/', `"${REF_PREFIX}`)) as JsonSchema;
}

function componentSchemas(): Record<string, JsonSchema> {
  const { schemas } = z.toJSONSchema(z.globalRegistry, { uri: (id) => `${REF_PREFIX}${id}`, target: 'draft-2020-12', unrepresentable: 'any' }) as {
    schemas: Record<string, JsonSchema>;
  };
  const out: Record<string, JsonSchema> = {};
  for (const [name, s] of Object.entries(schemas)) {
    if (!componentNames.has(name)) continue; // another module's schema with an id: not part of this API
    delete s.$schema;
    delete s.$id;
    out[name] = s;
  }
  return out;
}

function parameters(r: Route): JsonSchema[] {
  const out: JsonSchema[] = [];
  for (const [where, schema] of [
    ['path', r.params],
    ['query', r.query],
  ] as const) {
    if (!schema) continue;
    const json = schemaOf(schema, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
    for (const [name, s] of Object.entries(json.properties ?? {})) {
      const { description, ...rest } = s;
      out.push({ name, in: where, required: where === 'path' || (json.required ?? []).includes(name), ...(description ? { description } : {}), schema: rest });
    }
  }
  return out;
}

/** A loaded operation as the document describes it: its input schema becomes a component. */
export interface OperationDoc {
  name: string;
  description: string;
  input: JsonSchema;
}

const inputComponent = (operation: string) => `OperationInput.${operation}`;

/** An operation's input schema as a component; its local `$ref`s (`#/definitions/…`) are moved with it. */
function inputSchemaOf(op: OperationDoc): JsonSchema {
  const own = `${REF_PREFIX}${inputComponent(op.name)}`;
  let text = JSON.stringify(op.input);
  // A schema with its own $id resolves `#…` against itself wherever it sits; one without, against this document.
  if (typeof op.input.$id !== 'string') text = text.replaceAll('"$ref":"#/', `"$ref":"${own}/`).replaceAll('"$ref":"#"', `"$ref":"${own}"`);
  return { title: op.name, description: op.description, ...(JSON.parse(text) as JsonSchema) };
}

/** The `{operation}` parameter lists the loaded operations; the body's `input` is any of their inputs. */
function describeOperationInput(doc: { parameters?: JsonSchema[]; requestBody?: JsonSchema }, operations: readonly OperationDoc[]): void {
  if (operations.length === 0) return;
  const names = operations.map((o) => o.name);
  const param = doc.parameters?.find((p) => p.name === 'operation' && p.in === 'path');
  if (param) param.schema = { ...(param.schema as JsonSchema), enum: names };
  const body = (doc.requestBody as { content: Record<string, { schema: { properties: Record<string, JsonSchema> } }> } | undefined)?.content['application/json']
    ?.schema;
  if (!body?.properties?.input) return;
  body.properties.input = {
    description: `the input of the operation named in the path: components.schemas["${inputComponent('<operation>')}"], also served by GET /operations/{operation}; checked by that schema (400 naming each field)`,
    anyOf: names.map((n) => ({ $ref: `${REF_PREFIX}${inputComponent(n)}` })),
  };
}

const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: { $ref: `${REF_PREFIX}Problem` } } } });

function operation(r: Route, operations: readonly OperationDoc[]): JsonSchema {
  const ok = {
    description: r.status === 202 ? 'accepted: recorded durably before this answer' : 'ok',
    content: { 'application/json': { schema: schemaOf(r.response, 'output') } },
  };
  const responses: Record<string, unknown> = { [String(r.status)]: ok };
  if (r.otherStatus) responses[String(r.otherStatus.status)] = { ...ok, description: r.otherStatus.description };
  responses['400'] = problem('bad input: `errors` names each field; nothing was stored');
  responses['401'] = problem('no token, or a wrong one');
  responses['403'] = problem('a Host other than this server, or a state-changing request from another origin');
  if (r.params) responses['404'] = problem('no such resource');
  if (r.method === 'POST') {
    responses['409'] = problem('refused by the current state (e.g. LOCKED, or a thread that cannot be retried)');
    responses['413'] = problem('a body over 1 MiB');
    responses['415'] = problem('a body that is not application/json');
    responses['503'] = problem(
      'QUEUE_FULL (the queue is at engine.max_queued) or BACKPRESSURE (the WAL is over pressure.wal.max_bytes): nothing stored; try again after Retry-After seconds',
    );
  }
  const traced = r.path.startsWith('/commands/')
    ? [
        {
          name: 'traceparent',
          in: 'header',
          required: false,
          description: 'W3C Trace Context: the command joins this trace (an invalid value starts a new one)',
          schema: { type: 'string' },
        },
      ]
    : [];
  const doc: JsonSchema = {
    operationId: r.operationId,
    summary: r.summary,
    tags: [r.tag],
    ...(parameters(r).length + traced.length > 0 ? { parameters: [...parameters(r), ...traced] } : {}),
    ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: schemaOf(r.body, 'input') } } } } : {}),
    responses,
  };
  if (r.inputOfOperation) describeOperationInput(doc, operations);
  return doc;
}

/** The document for `routes`, with the input schemas of `operations` (those this daemon loaded). */
export function openApiDocument(routes: readonly Route[], operations: readonly OperationDoc[]): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const r of routes) (paths[r.path] ??= {})[r.method.toLowerCase()] = operation(r, operations);
  const inputs = routes.some((r) => r.inputOfOperation) ? Object.fromEntries(operations.map((o) => [inputComponent(o.name), inputSchemaOf(o)])) : {};
  return {
    openapi: '3.1.0',
    info: {
      title: 'combine',
      version: VERSION,
      description:
        'The HTTP API of the combine daemon: durable, audited LLM operations. Served on 127.0.0.1 only. Every request needs `Authorization: Bearer <COMBINE_HOME/http.token>` (or the dashboard cookie); errors are application/problem+json (RFC 9457).',
    },
    servers: [{ url: '/' }],
    security: [{ bearer: [] }, { cookie: [] }],
    paths,
    components: {
      schemas: { ...componentSchemas(), ...inputs },
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'the token in COMBINE_HOME/http.token' },
        cookie: { type: 'apiKey', in: 'cookie', name: COOKIE_NAME, description: 'set by opening the dashboard URL that `combine ui` prints' },
      },
    },
  };
}
