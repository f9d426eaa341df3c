/**
 * release_notes — an operation of your own, in one file and with no import: release notes for one
 * version of a project, written from the list of changes that went into it, and stored as the
 * project's `release_notes` document for that version.
 *
 *   cp examples/operations/release_notes.mjs "$COMBINE_HOME/operations/" && combine daemon stop
 *   combine operations check "$COMBINE_HOME/operations/release_notes.mjs"
 *   combine run release_notes --follow --input '{"project_id":"acme","version":"1.2.0","changes":["Fix login on Safari","Export orders as CSV"]}'
 *   combine doc acme release_notes --key 1.2.0
 *
 * combine does the rest: the thread, the lease before the call, the ledger, validation of the answer
 * against `output`, the document's versions under the lock, retries, budgets and recovery after a crash.
 * A second identical `run` returns the same thread; `--force` writes the notes again.
 */
export default {
  name: 'release_notes',
  description: 'Write the release notes of one version of a project from the list of its changes',

  // What `combine run release_notes --input …` accepts (JSON Schema). Anything else is refused, exit 2.
  input: {
    type: 'object',
    properties: {
      project_id: { type: 'string', minLength: 1 },
      version: { type: 'string', pattern: '^[0-9A-Za-z][0-9A-Za-z.+-]*$', maxLength: 64 },
      changes: { type: 'array', minItems: 1, maxItems: 200, items: { type: 'string', minLength: 1, maxLength: 500 } },
    },
    required: ['project_id', 'version', 'changes'],
    additionalProperties: false,
  },

  // One request per (project, version): release_notes:project:<project>:release_notes:<version>.
  identity: (input) => ({ space_type: 'project', space_id: input.project_id, target_doc_type: 'release_notes', target_id: input.version }),
  lockScope: (input) => `release_notes:${input.project_id}:${input.version}`,
  target: (input) => ({ project_id: input.project_id, doc_type: 'release_notes', key: input.version }),

  prompt: ({ input, project }) => ({
    messages: [
      {
        role: 'system',
        content: 'You write release notes for the users of a software product: plain words, grouped by what changed for them. Answer with one JSON object: {"headline","sections":[{"title","items":[...]}]}.',
      },
      { role: 'user', content: [`Release ${input.version} of ${project.name}`, '', 'Changes:', ...input.changes.map((c) => `- ${c}`)].join('\n') },
    ],
  }),

  // The answer: sent to the model as the response format, and validated before anything is applied.
  output: {
    type: 'object',
    properties: {
      headline: { type: 'string', minLength: 1 },
      sections: {
        type: 'array',
        minItems: 1,
        items: {
          type: 'object',
          properties: { title: { type: 'string', minLength: 1 }, items: { type: 'array', items: { type: 'string' } } },
          required: ['title', 'items'],
        },
      },
    },
    required: ['headline', 'sections'],
  },

  // Pure: the document's next content from its current one (null the first time) and the answer.
  apply: ({ current, answer, input }) => ({
    content: { version: input.version, headline: answer.headline, sections: answer.sections, changes: input.changes },
    summary: { version: input.version, sections: answer.sections.length, rewritten: current !== null },
  }),
};
