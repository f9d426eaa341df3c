/**
 * /openapi.json documents the input of `POST /commands/run/{operation}` with each loaded operation's own
 * JSON Schema, moved under components.schemas: the document stays valid OpenAPI 3.1, and the schema's
 * local references still point at its own parts after the move.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { apiRoutes } from '../../src/daemon/http/api.js';
import { openApiDocument } from '../../src/daemon/http/openapi.js';

/** A recursive input: local `$ref`s into its own `definitions`, and to its root. */
const TREE = {
  type: 'object',
  definitions: {
    node: {
      type: 'object',
      properties: { label: { type: 'string' }, children: { type: 'array', items: { $ref: '#/definitions/node' } } },
      required: ['label'],
    },
  },
  properties: { project_id: { type: 'string' }, root: { $ref: '#/definitions/node' }, again: { $ref: '#' } },
  required: ['project_id', 'root'],
};

/** Follows a `#/…` JSON pointer in `doc`. */
function resolve(doc: any, ref: string): unknown {
  return ref
    .slice(2)
    .split('/')
    .reduce((node, part) => node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
}

describe('openapi: operation inputs', () => {
  it("lists each operation's input as a component whose local references resolve inside it", async () => {
    const doc = openApiDocument(apiRoutes, [
      { name: 'tree_summary', description: 'summarise a tree', input: TREE },
      {
        name: 'with_id',
        description: 'has its own $id',
        input: { $id: 'urn:example:with-id', type: 'object', properties: { a: { $ref: '#/definitions/a' } }, definitions: { a: { type: 'string' } } },
      },
    ]) as any;
    expect(await new Validator().validate(structuredClone(doc))).toEqual({ valid: true });

    const tree = doc.components.schemas['OperationInput.tree_summary'];
    expect(tree).toMatchObject({ title: 'tree_summary', description: 'summarise a tree', required: ['project_id', 'root'] });
    expect(tree.properties.root.$ref).toBe('#/components/schemas/OperationInput.tree_summary/definitions/node');
    expect(resolve(doc, tree.properties.root.$ref)).toEqual(tree.definitions.node);
    expect(resolve(doc, tree.definitions.node.properties.children.items.$ref)).toEqual(tree.definitions.node);
    expect(resolve(doc, tree.properties.again.$ref)).toBe(tree);
    // With its own $id, `#/…` already resolves against the schema itself: left as written.
    expect(doc.components.schemas['OperationInput.with_id'].properties.a.$ref).toBe('#/definitions/a');
    // The operations given (not a fixed list) are the ones the path parameter names.
    const run = doc.paths['/commands/run/{operation}'].post;
    expect(run.parameters[0]).toMatchObject({ name: 'operation', in: 'path', schema: { enum: ['tree_summary', 'with_id'] } });
    expect(run.requestBody.content['application/json'].schema.properties.input.anyOf).toEqual([
      { $ref: '#/components/schemas/OperationInput.tree_summary' },
      { $ref: '#/components/schemas/OperationInput.with_id' },
    ]);
    // The operations' schemas are not changed by being documented.
    expect(TREE.properties.root.$ref).toBe('#/definitions/node');
  });
});
