/**
 * The request for one epic: its id, title and description. The rendered request is recorded verbatim
 * in the `prompt` ledger entry and sent as-is; a golden file under test/ pins it.
 */
import type { Epic } from '../../../domain/project.js';
import type { ChatMessage, ProjectInfo } from '../../api.js';

const SYSTEM_PROMPT = [
  'You are a senior product manager writing a story backlog.',
  'Write user stories for exactly one epic. Each story has a short title, a description in the form',
  '"As a <role>, I want <capability>, so that <benefit>", and concrete, testable acceptance criteria.',
  'Answer with one JSON object only: {"stories":[{"title","description","acceptance_criteria":[...]}]}.',
].join('\n');

export function storyMessages(project: ProjectInfo, epic: Epic): ChatMessage[] {
  const user = [
    `Project: ${project.name} (id: ${project.id})`,
    `Epic id: ${epic.id}`,
    `Epic title: ${epic.title}`,
    'Epic description:',
    epic.description.trim() === '' ? '(none given)' : epic.description.trim(),
    '',
    'Write between 3 and 8 user stories that together deliver this epic.',
  ].join('\n');
  return [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: user },
  ];
}
