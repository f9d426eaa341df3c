/**
 * Our canonical JSON writes the bytes the `canonicalize` package (2.1.0) writes — the package wrote every
 * ledger entry and cache key before ours, and a ledger's hashes and imports are checked against them.
 */
import canonicalizeModule from 'canonicalize';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/domain/canonical-json.js';
import { seededRandom } from '../helpers/seeded.js';

const canonicalize = canonicalizeModule as unknown as (value: unknown) => string | undefined;

/** A small deterministic generator (no Math.random: a failure must replay). */
function generator(seed: number) {
  const random = seededRandom(seed);
  const next = (n: number) => Math.floor(random() * n);
  const strings = [
    '',
    'a',
    'B',
    'é',
    'ü',
    '\u2028',
    '\ud800',
    '😀',
    '"q"',
    'back\\slash',
    'line\nbreak',
    '\u0000',
    '10',
    '2',
    '-1',
    '__proto__',
    'toString',
    'A'.repeat(50),
  ];
  const numbers = [0, -0, 1, -1, 0.1, 1e21, 1e-7, 5e-324, 2 ** 53, 1.5, -123.456, 1 / 3, 2 ** 53 + 2];
  const key = () => (next(4) === 0 ? `${next(30)}` : strings[next(strings.length)]! + (next(2) ? strings[next(strings.length)]! : ''));
  const value = (depth: number): unknown => {
    const kind = next(depth > 3 ? 5 : 9);
    if (kind === 0) return null;
    if (kind === 1) return next(2) === 0;
    if (kind === 2 || kind === 3) return numbers[next(numbers.length)]! * (next(2) ? 1 : next(1000));
    if (kind === 4) return strings[next(strings.length)]! + strings[next(strings.length)]!;
    if (kind === 5) return Array.from({ length: next(5) }, () => (next(10) === 0 ? undefined : value(depth + 1)));
    if (kind === 6) return new Date(next(2 ** 31) * 1000);
    const members: Record<string, unknown> = {};
    const n = next(kind === 7 ? 6 : 25);
    for (let i = 0; i < n; i++)
      Object.defineProperty(members, key(), { value: next(10) === 0 ? undefined : value(depth + 1), enumerable: true, writable: true, configurable: true });
    return members;
  };
  return value;
}

describe('canonical JSON', () => {
  it('writes what the canonicalize package writes, on generated values', () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const value = generator(seed)(0);
      expect(canonicalJson(value), `seed ${seed}`).toBe(canonicalize(value));
    }
  });

  it('writes what the package writes for JSON the engine records', () => {
    const answer = { stories: [{ title: 'Pay', acceptance: ['given', 'when'], points: 3 }], z: null, a: { y: [1, { c: 2, b: [] }], x: {} } };
    const parsed = JSON.parse(JSON.stringify({ request: { messages: [{ role: 'user', content: JSON.stringify(answer) }], temperature: 0 }, answer }));
    expect(canonicalJson(parsed)).toBe(canonicalize(parsed));
    const holed = [undefined, 1, 0, 2];
    delete holed[2]; // a hole, which the package's walk skips
    expect(canonicalJson(holed)).toBe(canonicalize(holed));
  });

  it('refuses what the package refuses', () => {
    expect(() => canonicalJson(Number.NaN)).toThrow('NaN is not allowed');
    expect(() => canonicalJson({ a: [Number.POSITIVE_INFINITY] })).toThrow('Infinity is not allowed');
    expect(() => canonicalJson(undefined)).toThrow(TypeError);
    expect(() => canonicalJson(10n)).toThrow(TypeError);
  });
});
