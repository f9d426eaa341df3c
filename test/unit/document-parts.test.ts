/**
 * Planning a write of a document stored in parts: only what changed is written, the order is kept
 * or every part is written again, and content that cannot be stored in parts is stored whole.
 */
import { describe, expect, it } from 'vitest';
import { assembleDocumentText, assembledChars, ordsBetween, planParts, splitDocument } from '../../src/domain/document-parts.js';

const layout = { field: 'epics', key: 'id' };
const split = (content: unknown) => splitDocument(content, layout)!;
const doc = (...ids: string[]) => ({ name: 'b', epics: ids.map((id) => Object.freeze({ id, n: 1 })) });

describe('planParts', () => {
  it('writes only the element that changed, in place, and the head', () => {
    const before = doc('a', 'b', 'c');
    const next = { ...before, epics: [before.epics[0], { id: 'b', n: 2 }, before.epics[2]] };
    const plan = planParts(split(before), split(next), layout);
    expect(plan).toMatchObject({ kind: 'incremental', changed: [{ key: 'b', text: '{"id":"b","n":2}' }], inserted: [], removed: [], charsDelta: 0, count: 3 });
    expect(plan!.head).toBe('{"name":"b","epics":[]}');
  });

  it('inserts a new element between its neighbours and removes a dropped one', () => {
    const before = doc('a', 'c', 'd');
    const next = { ...before, epics: [before.epics[0], { id: 'b', n: 1 }, before.epics[1]] };
    const plan = planParts(split(before), split(next), layout);
    expect(plan).toMatchObject({ kind: 'incremental', changed: [], removed: ['d'], inserted: [{ after: 'a', before: 'c', parts: [{ key: 'b' }] }] });
    expect(plan?.kind === 'incremental' && plan.charsDelta).toBe(0); // one element of the same size in, one out
  });

  it('writes everything again when kept elements change order, and stores whole what has duplicate keys', () => {
    const before = doc('a', 'b');
    expect(planParts(split(before), split({ ...before, epics: [before.epics[1], before.epics[0]] }), layout)?.kind).toBe('rewrite');
    expect(planParts(split(before), split({ ...before, epics: [before.epics[0], before.epics[0]] }), layout)).toBeNull();
    expect(planParts(null, split({ epics: [{ id: 'x' }, { id: 'x' }] }), layout)).toBeNull();
    expect(planParts(null, split({ epics: [{ id: 1 }] }), layout)).toBeNull();
    expect(splitDocument({ epics: 'no' }, layout)).toBeNull();
  });

  it('finds orders between neighbours until the numbers run out', () => {
    expect(ordsBetween(null, null, 2)).toEqual([0, 1]);
    expect(ordsBetween(1, 2, 1)).toEqual([1.5]);
    expect(ordsBetween(null, 0, 2)).toEqual([-2, -1]);
    expect(ordsBetween(3, null, 1)).toEqual([4]);
    expect(ordsBetween(1, 1 + Number.EPSILON, 1)).toBeNull();
  });

  it('puts the document back together as the same JSON text, and knows its size without reading it', () => {
    const content = {
      name: 'b',
      epics: [
        { id: 'a', n: 1 },
        { id: 'b', n: 2 },
      ],
      tail: true,
    };
    const plan = planParts(null, split(content), layout)!;
    expect(plan.kind).toBe('rewrite');
    if (plan.kind !== 'rewrite') return;
    const text = assembleDocumentText(
      plan.head,
      'epics',
      plan.parts.map((p) => p.text),
    );
    expect(text).toBe(JSON.stringify(content));
    expect(assembledChars(plan.head, plan.chars, plan.count)).toBe(text.length);
    expect(assembleDocumentText('{"epics":[]}', 'epics', [])).toBe('{"epics":[]}');
  });
});
