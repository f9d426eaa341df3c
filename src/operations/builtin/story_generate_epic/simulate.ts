/**
 * The simulator's answer to this operation's requests (`combine demo`, tests): stories that read like
 * a backlog, derived from the epic's id and title only, so the same epic always gets the same stories.
 */
import { createHash } from 'node:crypto';

const ROLES = ['a shopper', 'an administrator', 'a support agent', 'a new user', 'a returning customer', 'an analyst'];
const BENEFITS = ['I save time', 'I can trust the result', 'I stay in control', 'nothing is lost', 'I can act on it quickly'];

/** Deterministic stories for an epic (with an extra field, `estimate_points`, as models add). */
export function simulatedStories(epicId: string, epicTitle: string) {
  const h = createHash('sha256').update(`${epicId}\n${epicTitle}`).digest();
  const count = 3 + (h[0]! % 3);
  const subject = epicTitle.toLowerCase();
  return Array.from({ length: count }, (_, i) => {
    const role = ROLES[h[i + 1]! % ROLES.length]!;
    const benefit = BENEFITS[h[i + 7]! % BENEFITS.length]!;
    return {
      title: `${epicTitle}: part ${i + 1}`,
      description: `As ${role}, I want ${subject} (step ${i + 1} of ${count}), so that ${benefit}.`,
      acceptance_criteria: [
        `Given ${role}, when they use step ${i + 1} of "${epicTitle}", then the outcome is saved`,
        `Errors in step ${i + 1} are shown with a clear message`,
      ],
      estimate_points: 1 + (h[i + 13]! % 8),
    };
  });
}

/** The answer to a request whose messages are `text`. */
export function simulateStoriesAnswer(text: string): unknown {
  const epicId = /Epic id: (.+)/.exec(text)?.[1]?.trim() ?? 'unknown';
  const epicTitle = /Epic title: (.+)/.exec(text)?.[1]?.trim() ?? 'Untitled';
  return { stories: simulatedStories(epicId, epicTitle) };
}
