/**
 * `story_generate_epic`: write the user stories of one epic into the project's story backlog.
 * Key: `story_generate_epic:project:<project>:story_backlog:<epic>`; lock: `epic:<project>:<epic>`.
 */
import { EMPTY_BACKLOG, STORY_BACKLOG, type StoryBacklog } from '../../../domain/backlog.js';
import { EPIC_ARCHITECTURE, type Epic, type EpicArchitecture } from '../../../domain/project.js';
import { defineOperation, type Documents } from '../../api.js';
import { applyStoriesToBacklog, trimStories } from './merge.js';
import { storyMessages } from './prompt.js';
import { storyRules } from './rules.js';
import { INPUT_SCHEMA, STORIES_JSON_SCHEMA, type EpicInput, type StoriesAnswer } from './schema.js';

export const NAME = 'story_generate_epic';

function epicsOf(documents: Documents): Epic[] {
  return (documents.get(EPIC_ARCHITECTURE) as EpicArchitecture | null)?.epics ?? [];
}

/** An architecture's epics by id, and each epic's place in it (unknown ids last). */
interface EpicIndex {
  byId: Map<string, Epic>;
  rank: (id: string) => number;
}

/**
 * One index per architecture version: documents are parsed once per version and frozen, so the same
 * array comes back until the architecture changes — a project of 10,000 epics is not scanned per epic,
 * and the same `rank` function tells merge.ts that a backlog it ordered needs no check.
 */
const indexes = new WeakMap<readonly Epic[], EpicIndex>();

function indexOf(documents: Documents): EpicIndex {
  const epics = epicsOf(documents);
  let index = indexes.get(epics);
  if (!index) {
    const byId = new Map(epics.map((e) => [e.id, e]));
    const order = new Map(epics.map((e, i) => [e.id, i]));
    index = { byId, rank: (id) => order.get(id) ?? Number.MAX_SAFE_INTEGER };
    indexes.set(epics, index);
  }
  return index;
}

function epicOf(documents: Documents, input: EpicInput): Epic {
  const epic = indexOf(documents).byId.get(input.epic_id);
  if (!epic) {
    throw Object.assign(new Error(`project "${input.project_id}" has no epic "${input.epic_id}" (see \`combine project show ${input.project_id}\`)`), {
      code: 'NOT_FOUND',
    });
  }
  return epic;
}

export const storyGenerateEpic = defineOperation<EpicInput, StoriesAnswer, StoryBacklog>({
  name: NAME,
  description: 'Write the user stories of one epic into the project story backlog',
  input: INPUT_SCHEMA,
  identity: (i) => ({ space_type: 'project', space_id: i.project_id, target_doc_type: STORY_BACKLOG, target_id: i.epic_id }),
  // Epic ids are unique within a project only, so the scope names both.
  lockScope: (i) => `epic:${i.project_id}:${i.epic_id}`,
  target: (i) => ({ project_id: i.project_id, doc_type: STORY_BACKLOG, epic_id: i.epic_id }),
  // One row per epic: regenerating an epic writes its stories, not the whole backlog.
  parts: { field: 'epics', key: 'epic_id' },
  prompt: ({ input, documents, project }) => ({ messages: storyMessages(project, epicOf(documents, input)) }),
  output: STORIES_JSON_SCHEMA,
  rules: storyRules,
  apply({ current, answer, input, documents, provenance }) {
    const change = applyStoriesToBacklog(current ?? EMPTY_BACKLOG, epicOf(documents, input), indexOf(documents).rank, trimStories(answer.stories), {
      thread_id: provenance.thread_id,
      work_item_id: provenance.work_item_id,
      generated_at: provenance.at,
    });
    return { content: change.content, summary: change.summary };
  },
});
