/**
 * The request for a briefing: the project's state as the model is told it — epics with their story
 * counts, thread outcomes — gathered when the prompt is built. A golden file under test/ pins it.
 */
import { STORY_BACKLOG, type StoryBacklog } from '../../../domain/backlog.js';
import { EPIC_ARCHITECTURE, type EpicArchitecture } from '../../../domain/project.js';
import type { ChatMessage, PromptContext, ProjectInfo, ThreadFact } from '../../api.js';

/** How many failed and running threads a briefing names (the counts cover all of them). */
const LISTED_THREADS = 10;

export interface ProjectFacts {
  epics: { epic_id: string; title: string; stories: number }[];
  /** Thread counts by status (briefing threads excluded: a briefing does not report on briefings). */
  threads: Record<string, number>;
  failed: BriefingThread[];
  running: BriefingThread[];
}

export interface BriefingThread {
  thread_id: string;
  kind: string;
  /** The epic, the document key, or "all epics". */
  target: string;
  status: string;
  error_code: string | null;
  created_at: string;
}

function briefingThread(t: ThreadFact): BriefingThread {
  const target = (t.target_ref.epic_id ?? t.target_ref.key ?? 'all epics') as string;
  return { thread_id: t.thread_id, kind: t.kind, target, status: t.status, error_code: t.error_code, created_at: t.created_at };
}

export function gatherProjectFacts(ctx: PromptContext<unknown>, ownKind: string): ProjectFacts {
  const epics = (ctx.documents.get(EPIC_ARCHITECTURE) as EpicArchitecture | null)?.epics ?? [];
  const backlog = (ctx.documents.get(STORY_BACKLOG) as StoryBacklog | null) ?? { epics: [] };
  const exclude_kinds = [ownKind];
  return {
    epics: epics.map((e) => ({ epic_id: e.id, title: e.title, stories: backlog.epics.find((b) => b.epic_id === e.id)?.stories.length ?? 0 })),
    threads: ctx.threads.countByStatus({ exclude_kinds }),
    failed: ctx.threads.list({ statuses: ['failed'], limit: LISTED_THREADS, exclude_kinds }).map(briefingThread),
    running: ctx.threads.list({ statuses: ['open', 'running'], limit: LISTED_THREADS, exclude_kinds }).map(briefingThread),
  };
}

const SYSTEM_PROMPT = [
  'You are a delivery lead writing a short status briefing about one software project for its team.',
  'Use only the facts given. Say plainly what is done, what failed and what is still running.',
  'Answer with one JSON object only: {"summary","highlights":[...],"risks":[...],"next_steps":[...]}.',
].join('\n');

export function briefingMessages(project: ProjectInfo, date: string, facts: ProjectFacts): ChatMessage[] {
  const counts = Object.entries(facts.threads)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, n]) => `${n} ${status}`);
  const threadLine = (t: BriefingThread) =>
    `- ${t.kind} for ${t.target} (thread ${t.thread_id}, since ${t.created_at}${t.error_code ? `, error ${t.error_code}` : ''})`;
  const user = [
    `Project: ${project.name} (id: ${project.id})`,
    `Briefing date: ${date}`,
    '',
    'Epics and the stories generated for them:',
    ...(facts.epics.length === 0 ? ['(no epics)'] : facts.epics.map((e) => `- ${e.epic_id} "${e.title}": ${e.stories} stories`)),
    '',
    `Generation threads: ${counts.length === 0 ? 'none yet' : counts.join(', ')}`,
    'Failed threads:',
    ...(facts.failed.length === 0 ? ['(none)'] : facts.failed.map(threadLine)),
    'Running threads:',
    ...(facts.running.length === 0 ? ['(none)'] : facts.running.map(threadLine)),
    '',
    'Write the briefing: a two or three sentence summary, then highlights, risks and next steps (each may be empty).',
  ].join('\n');
  return [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: user },
  ];
}
