/**
 * findUnstorableText names where a U+0000 or a lone surrogate is without holding it; storableMessage keeps a message
 * readable (domain/storable-text.ts).
 */
import { describe, expect, it } from 'vitest';
import { findUnstorableText, mayHoldUnstorableText, NUL_REFUSED, storableMessage, UNPAIRED_SURROGATE_REFUSED } from '../../src/domain/storable-text.js';
import { checkAnswer, lockScopeOf, planMutation } from '../../src/operations/runtime.js';
import type { Operation } from '../../src/operations/registry.js';

/** The path of the first NUL, as the checks name it. */
const findNul = (value: unknown) => {
  const found = findUnstorableText(value);
  if (found !== null) expect(found.problem).toBe(NUL_REFUSED);
  return found?.path ?? null;
};

describe('findUnstorableText: U+0000', () => {
  it('names the first string holding U+0000, in the form of the schema errors', () => {
    expect(findNul({ a: 'x', b: [{ c: 'ok' }, { c: 'n\0' }] })).toBe('b[1].c');
    expect(findNul(['ok', 'no\0'])).toBe('[1]');
    expect(findNul('\0')).toBe('(root)');
    expect(findNul({ 'k\0': 1 })).toBe('(root) (a field name)');
    expect(findNul({ a: { 'k\0': 1 } })).toBe('a (a field name)');
    // the first in document order, whatever the depth
    expect(findNul({ a: [{ b: 'x\0' }], c: 'y\0' })).toBe('a[0].b');
    expect(findNul({ a: [{ b: 'x' }], 'c\0': 'y\0', d: '\0' })).toBe('(root) (a field name)');
    expect(findNul({ a: 1, b: [null, true, { c: ['ok', 'n\0'] }] })).toBe('b[2].c[1]');
  });

  it('finds nothing in text without it: the six characters \\u0000, numbers, null', () => {
    expect(findNul({ a: '\\u0000', b: 0, c: null, d: true, e: [] })).toBeNull();
    expect(findNul(undefined)).toBeNull();
  });
});

describe('findUnstorableText: half of a surrogate pair', () => {
  it('names a lone high or low surrogate, in a value or a field name, and passes whole pairs', () => {
    const lone = (value: unknown) => {
      const found = findUnstorableText(value);
      if (found !== null) expect(found.problem).toBe(UNPAIRED_SURROGATE_REFUSED);
      return found?.path ?? null;
    };
    expect(lone(JSON.parse('{"a":"ok","b":["x\\ud800y"]}'))).toBe('b[0]');
    expect(lone({ a: 'end\udc00' })).toBe('a');
    expect(lone({ a: 'reversed \udc00\ud800' })).toBe('a');
    expect(lone({ 'k\ud83d': 1 })).toBe('(root) (a field name)');
    expect(lone({ a: 'a whole emoji \ud83d\ude00', b: JSON.parse('"\\ud83d\\ude00"'), 'U+FFFD \ufffd': 1 })).toBeNull();
    // The first in document order, whichever it is.
    expect(findUnstorableText({ a: 'x\ud800', b: 'y\0' })).toEqual({ path: 'a', problem: UNPAIRED_SURROGATE_REFUSED, code: 'UNPAIRED_SURROGATE_IN_TEXT' });
    expect(findUnstorableText({ a: 'x\0', b: 'y\ud800' })).toEqual({ path: 'a', problem: NUL_REFUSED, code: 'NUL_IN_TEXT' });
  });

  it('mayHoldUnstorableText: JSON text that may parse to one (escaped or raw), and none that cannot', () => {
    expect(mayHoldUnstorableText('{"a":"\\ud800"}')).toBe(true);
    expect(mayHoldUnstorableText('{"a":"\\uDC01"}')).toBe(true);
    expect(mayHoldUnstorableText('{"a":"\\u0000"}')).toBe(true);
    expect(mayHoldUnstorableText('{"a":"raw \ud800"}')).toBe(true);
    expect(mayHoldUnstorableText('{"a":"\\u00e9 \\uffff plain \ud83d\ude00"}')).toBe(false);
  });
});

describe('storableMessage', () => {
  it('writes each U+0000 as the text \\u0000, half a surrogate pair as U+FFFD, and leaves other text as it is', () => {
    expect(storableMessage('a\0b\0')).toBe('a\\u0000b\\u0000');
    expect(storableMessage('bad \ud83d at 7, \ud83d\ude00 kept')).toBe('bad \ufffd at 7, \ud83d\ude00 kept');
    expect(storableMessage('plain')).toBe('plain');
  });
});

describe('findUnstorableText on a deeply nested value', () => {
  it('walks as deep as JSON.parse reads (its own stack, not the call stack)', () => {
    const deep = JSON.parse(`{"b":${'['.repeat(20_000)}"x\\u0000"${']'.repeat(20_000)},"a":"ok"}`);
    expect(findNul(deep)).toBe(`b${'[0]'.repeat(20_000)}`);
    expect(findNul(JSON.parse(`{"b":${'['.repeat(20_000)}${']'.repeat(20_000)},"a":"\\u0000"}`))).toBe('a');
    expect(findNul(JSON.parse(`${'{"k":'.repeat(20_000)}null${'}'.repeat(20_000)}`))).toBeNull();
  });
});

describe("checkAnswer: an answer's failure reasons never hold U+0000 (they are stored as the item's error_message)", () => {
  const operation = (check: (answer: unknown) => unknown[]) => ({ name: 'x', checkAnswer: check }) as unknown as Operation;

  it('an answer that is not JSON, holding a raw NUL: JSON.parse quotes it, the reason has it escaped', () => {
    for (const content of ['\0{"a":1}', '[1,\0]']) {
      const r = checkAnswer(
        operation(() => []),
        content,
      );
      expect(r.ok).toBe(false);
      const [reason] = (r as { errors: string[] }).errors;
      expect(reason).toContain('the answer is not JSON');
      expect(reason).toContain('\\u0000');
      expect(reason).not.toContain('\0');
    }
  });

  it('rules.check echoing the answer: its messages escaped', () => {
    expect(
      checkAnswer(
        operation(() => ['title: "a\0b" is taken']),
        '{"title":"ok"}',
      ),
    ).toEqual({ ok: false, errors: ['title: "a\\u0000b" is taken'] });
  });

  it("a throw in the operation's code (rules.check here, apply alike): its message escaped in the OperationCallError", () => {
    const throwing = operation(() => {
      throw new Error('no section "a\0"');
    });
    expect(() => checkAnswer(throwing, '{}')).toThrow('x.rules.check: no section "a\\u0000"');
  });

  it('a NUL behind 6,000 levels of nesting: an invalid answer naming it, no RangeError', () => {
    const r = checkAnswer(
      operation(() => []),
      `{"b":${'['.repeat(6000)}${']'.repeat(6000)},"a":"\\u0000"}`,
    );
    expect(r).toEqual({ ok: false, errors: [expect.stringMatching(/^a: holds the character U\+0000/)] });
  });
});

describe("an operation's own code putting U+0000 in what is stored: an unusable result on both backends", () => {
  const operation = (definition: Record<string, unknown>) => ({ name: 'x', definition }) as unknown as Operation;
  const plan = (result: unknown, parts?: unknown, current: unknown = null) =>
    planMutation(operation({ apply: () => result, ...(parts ? { parts } : {}) }), {
      current,
      answer: {},
      input: {},
      documents: { get: () => null },
      provenance: { thread_id: 't', work_item_id: 'w', at: 0 },
    });

  it('a lock scope (as identity and target): refused naming it', () => {
    expect(() => lockScopeOf(operation({ lockScope: () => 'notes:\0' }), {})).toThrow(
      'x.lockScope: the lock scope holds the character U+0000 (NUL), which combine does not store: remove it',
    );
  });

  it("apply's content, whole or in parts (a part's key), and its summary: refused naming the field; the six characters \\u0000 are text", () => {
    expect(() => plan({ content: { a: ['ok', 'b\0'] }, summary: {} })).toThrow(/^x\.apply: content a\[1\] holds the character U\+0000/);
    const parts = { field: 'sections', key: 'name' };
    expect(() => plan({ content: { sections: [{ name: 'k\0', text: '' }] }, summary: {} }, parts)).toThrow(/^x\.apply: content sections\[0\]\.name holds/);
    expect(() => plan({ content: {}, summary: { note: '\0' } })).toThrow(/^x\.apply: summary note holds/);
    expect(plan({ content: { a: '\\u0000' }, summary: { b: '\\u0000' } }).text).toBe('{"a":"\\\\u0000"}');
  });

  it("content in parts: the head and every element apply did not keep are read — changed, new, keyless — but no kept one, moved or not, with others appended or removed around it (a mutation's cost stays flat in the document's size)", () => {
    const parts = { field: 'sections', key: 'name' };
    // A kept element is the same object as the stored one, checked when it was planned: it is never read
    // again (reading this one would throw).
    const kept = Object.freeze(
      Object.defineProperty({ name: 'k' }, 'text', {
        enumerable: true,
        get: () => {
          throw new Error('a kept element was read');
        },
      }),
    );
    const other = Object.freeze({ name: 'o', text: '' });
    const current = { title: 't', sections: [kept, other] };
    expect(
      plan({ content: { title: 't', sections: [kept, { name: 'o', text: 'new' }, { name: 'n', text: '' }] }, summary: {} }, parts, current).split,
    ).not.toBeNull();
    expect(() => plan({ content: { title: 't', sections: [kept, { name: 'o', text: 'x\0' }] }, summary: {} }, parts, current)).toThrow(
      /content sections\[1\]\.text holds/,
    );
    expect(() => plan({ content: { title: 't', sections: [{ name: 'n\0' }, other, kept] }, summary: {} }, parts, current)).toThrow(
      /content sections\[0\]\.name holds/,
    );
    expect(() => plan({ content: { title: 't\0', sections: [kept, other] }, summary: {} }, parts, current)).toThrow(/content title holds/);

    // Moved, appended, removed around a kept element; a keyless element and a changed one are read.
    expect(plan({ content: { title: 't', sections: [other, kept] }, summary: {} }, parts, current).split).not.toBeNull();
    expect(plan({ content: { title: 't', sections: [other, kept, { name: 'z', text: '' }] }, summary: {} }, parts, current).split).not.toBeNull();
    expect(plan({ content: { title: 't', sections: [kept] }, summary: {} }, parts, current).split).not.toBeNull();
    expect(() => plan({ content: { title: 't', sections: [kept, 'a\0'] }, summary: {} }, parts, current)).toThrow(/sections\[1\] holds/);
    expect(() => plan({ content: { title: 't', sections: [{ name: 'o', text: '\0' }, kept] }, summary: {} }, parts, current)).toThrow(
      /sections\[0\]\.text holds/,
    );
  });
});
