/** Pure parts of the ledger products: completeness tracking, answer rules, story diffs, cache keys. */
import { describe, expect, it } from 'vitest';
import { requestCacheKey } from '../../src/domain/cache-key.js';
import { CompletenessTracker } from '../../src/ledger/completeness.js';
import { diffStories } from '../../src/operations/builtin/story_generate_epic/merge.js';
import { checkStoryRules as checkAnswerRules } from '../../src/operations/builtin/story_generate_epic/rules.js';

const story = (title: string, extra: Record<string, unknown> = {}) => ({ title, description: `d ${title}`, acceptance_criteria: ['c'], ...extra });
let seq = 0;
const entry = (work_item_id: string | null, entry_type: string) => ({ seq: ++seq, thread_id: 't', work_item_id, entry_type });

describe('completeness tracker', () => {
  it('accepts retries, repairs, replays and a prompt whose call is in flight', () => {
    const t = new CompletenessTracker();
    for (const [w, type] of [
      ['a', 'prompt'],
      ['a', 'error'],
      ['a', 'prompt'],
      ['a', 'response'],
      ['a', 'parse_report'],
      ['a', 'mutation_report'],
      ['b', 'response'],
      ['b', 'parse_report'],
      ['b', 'mutation_report'], // a replay: the answer is a copy, no prompt
      ['c', 'prompt'],
    ] as const)
      t.observe(entry(w, type));
    expect(t.finish((id) => id === 'c')).toEqual([]);
  });

  it('names an unanswered prompt, a prompt asked again without an outcome, and a mutation with no answer', () => {
    seq = 0;
    const t = new CompletenessTracker();
    t.observe(entry('a', 'prompt')); // 1: asked again at 2 without an outcome
    t.observe(entry('a', 'prompt')); // 2
    t.observe(entry('a', 'response'));
    t.observe(entry('b', 'mutation_report')); // 4
    t.observe(entry('c', 'prompt')); // 5: never answered, not in flight
    expect(t.finish(() => false).map((i) => [i.seq, i.work_item_id, i.reason])).toEqual([
      [1, 'a', 'a prompt has no response or error (entry 2 asked again)'],
      [4, 'b', 'a mutation_report with no recorded response before it'],
      [5, 'c', 'a prompt has no response or error'],
    ]);
  });
});

describe('answer rules', () => {
  it('passes with no rules and names each violation', () => {
    const answer = { stories: [story('A', { priority: 'high' }), story('B', { priority: '' })] };
    expect(checkAnswerRules(answer, {})).toEqual([]);
    expect(checkAnswerRules(answer, { min_stories: 3, required_story_fields: ['priority'] })).toEqual([
      'stories: needs at least 3 stories (got 2)',
      'stories[1].priority: is required',
    ]);
    expect(checkAnswerRules(answer, { max_stories: 1 })).toEqual(['stories: allows at most 1 stories (got 2)']);
    expect(checkAnswerRules({ stories: [story(' ')] }, {})).toEqual(['stories[0].title: must not be empty']);
  });
});

describe('story diff', () => {
  it('compares by title: added, removed, changed, unchanged', () => {
    expect(diffStories([story('A'), story('B'), story('C')], [story('A'), story('B', { points: 3 }), story('D')])).toEqual({
      added: ['D'],
      removed: ['C'],
      changed: ['B'],
      unchanged: 1,
    });
  });
});

describe('request cache key', () => {
  it('ignores key order and separates endpoints and parameters', () => {
    const req = { model: 'm', temperature: 0, messages: [{ role: 'user', content: 'x' }] };
    const same = { messages: [{ content: 'x', role: 'user' }], temperature: 0, model: 'm' };
    expect(requestCacheKey('http://a/v1', req)).toBe(requestCacheKey('http://a/v1', same));
    expect(requestCacheKey('http://b/v1', req)).not.toBe(requestCacheKey('http://a/v1', req));
    expect(requestCacheKey('http://a/v1', { ...req, max_tokens: 10 })).not.toBe(requestCacheKey('http://a/v1', req));
  });
});
