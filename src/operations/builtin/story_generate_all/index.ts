/**
 * `story_generate_all`: the orchestration of a whole project's stories — a parent thread holding
 * `project:<project>` with one `story_generate_epic` child per epic (continue_on_error). A child has
 * the same key as a single-epic request, so an epic already generated or being generated is not
 * paid for again (unless --force).
 */
import { STORY_BACKLOG } from '../../../domain/backlog.js';
import { EPIC_ARCHITECTURE, type EpicArchitecture } from '../../../domain/project.js';
import { defineOperation } from '../../api.js';
import { NAME as EPIC_OPERATION } from '../story_generate_epic/index.js';
import type { EpicInput } from '../story_generate_epic/schema.js';

export const NAME = 'story_generate_all';

interface ProjectInput {
  project_id: string;
}

export const storyGenerateAll = defineOperation<ProjectInput>({
  name: NAME,
  description: 'Write the user stories of every epic of a project: one story_generate_epic child per epic',
  input: {
    type: 'object',
    properties: { project_id: { type: 'string', minLength: 1, maxLength: 128 } },
    required: ['project_id'],
    additionalProperties: false,
  },
  identity: (i) => ({ space_type: 'project', space_id: i.project_id, target_doc_type: STORY_BACKLOG, target_id: 'all' }),
  // Taken when the orchestration starts, while it holds no epic lock (ADR-035 §9 lock order).
  lockScope: (i) => `project:${i.project_id}`,
  target: (i) => ({ project_id: i.project_id, doc_type: STORY_BACKLOG }),
  priority: 'bulk',
  children: (i, { documents }): EpicInput[] =>
    ((documents.get(EPIC_ARCHITECTURE) as EpicArchitecture | null)?.epics ?? []).map((e) => ({ project_id: i.project_id, epic_id: e.id })),
  child: EPIC_OPERATION,
});
