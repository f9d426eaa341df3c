import { describe, expect, it } from 'vitest';
import { renderRepairPrompt } from '../../src/domain/prompts.js';
import { storyRequest as renderStoryPrompt } from '../helpers/operations.js';
import { expectGolden } from '../helpers/golden.js';

const project = { id: 'acme', name: 'ACME Shop' };
const epic = {
  id: 'checkout',
  title: 'Checkout',
  description: 'Shoppers pay for their cart with a card or a wallet, get a confirmation, and never pay twice for one order.',
};
const params = { model: 'gpt-4o-mini', temperature: 0.2, maxTokens: 2048 };

describe('story prompt', () => {
  it('matches the golden rendering for a sample epic', () => {
    expectGolden('story-prompt.json', `${JSON.stringify(renderStoryPrompt(project, epic, params), null, 2)}\n`);
  });

  it("carries the epic's id, title and description, and asks for the stories schema", () => {
    const r = renderStoryPrompt(project, epic, params);
    const user = r.messages.find((m) => m.role === 'user')!.content;
    expect(user).toContain('Epic id: checkout');
    expect(user).toContain('Epic title: Checkout');
    expect(user).toContain(epic.description);
    expect(r.response_format.type).toBe('json_schema');
    expect(r.response_format.json_schema.schema).toMatchObject({ required: ['stories'] });
  });

  it('matches the golden repair rendering: the invalid answer and its errors are sent back', () => {
    const base = renderStoryPrompt(project, epic, params);
    const repair = renderRepairPrompt(base, '{"stories":[{"title":"x"}]}', ['stories[0].description: Invalid input']);
    expect(repair.messages.slice(0, 2)).toEqual(base.messages);
    expectGolden('repair-prompt.json', `${JSON.stringify(repair, null, 2)}\n`);
  });
});
