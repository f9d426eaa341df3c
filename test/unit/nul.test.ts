/** findNul names where a U+0000 is without holding it; escapeNul keeps a message readable (domain/nul.ts). */
import { describe, expect, it } from 'vitest';
import { escapeNul, findNul } from '../../src/domain/nul.js';

describe('findNul', () => {
  it('names the first string holding U+0000, in the form of the schema errors', () => {
    expect(findNul({ a: 'x', b: [{ c: 'ok' }, { c: 'n\0' }] })).toBe('b[1].c');
    expect(findNul(['ok', 'no\0'])).toBe('[1]');
    expect(findNul('\0')).toBe('(root)');
    expect(findNul({ 'k\0': 1 })).toBe('(root) (a field name)');
    expect(findNul({ a: { 'k\0': 1 } })).toBe('a (a field name)');
  });

  it('finds nothing in text without it: the six characters \\u0000, numbers, null', () => {
    expect(findNul({ a: '\\u0000', b: 0, c: null, d: true, e: [] })).toBeNull();
    expect(findNul(undefined)).toBeNull();
  });
});

describe('escapeNul', () => {
  it('writes each U+0000 as the text \\u0000 and leaves other text as it is', () => {
    expect(escapeNul('a\0b\0')).toBe('a\\u0000b\\u0000');
    expect(escapeNul('plain')).toBe('plain');
  });
});
