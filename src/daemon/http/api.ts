/**
 * The JSON API's endpoints (WS-ADR-035 §12 and issue 19). Each handler is one call of a service method —
 * the one the tRPC router calls for the same CLI command — so answers are the CLI's `--json` shapes.
 */
import { z } from 'zod';
import type { RequestOptions } from '../services/threads.js';
import type { ThreadView } from '../views.js';
import { route, type Route } from './routes.js';
import {
  commandSchema,
  documentHeadSchema,
  documentParams,
  documentQuery,
  documentSchema,
  generateAllBody,
  generateEpicBody,
  healthSchema,
  ledgerEntrySchema,
  operationDetailSchema,
  operationParams,
  operationSummarySchema,
  projectParams,
  projectSchema,
  projectThreadsQuery,
  runBody,
  runSchema,
  runsQuery,
  scheduleParams,
  scheduleSchema,
  schedulesQuery,
  threadParams,
  threadDetailSchema,
  threadSchema,
  threadsQuery,
  usageQuery,
  usageReportSchema,
} from './schemas.js';

/** Who asked, as the ledger records it (the CLI records the user name). */
const CREATED_BY = 'http';

const accepted = (r: { thread_id: string }) => ({ location: `/threads/${r.thread_id}` });

/** A command's options as the services take them: the deadline stays relative, the service's clock places it. */
const requestOptions = (body: { force: boolean; deadline_ms: number | null }, traceparent: string | null): RequestOptions => ({
  force: body.force,
  deadlineMs: body.deadline_ms,
  createdBy: CREATED_BY,
  traceparent,
});

/** `Link: <…?cursor=last>; rel="next"` when the page is full, so a client can walk every thread. */
function nextPage(path: string, query: Record<string, unknown>, list: ThreadView[], limit: number): Record<string, string> {
  if (list.length < limit) return {};
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || k === 'cursor' || v === false) continue;
    q.set(k, Array.isArray(v) ? v.join(',') : String(v));
  }
  q.set('cursor', list[list.length - 1]!.thread_id);
  return { link: `<${path}?${q}>; rel="next"` };
}

type ThreadsQuery = z.output<typeof threadsQuery>;
const threadFilter = (q: ThreadsQuery, projectId: string | null) => ({
  active: q.active,
  projectId,
  statuses: q.status,
  kind: q.kind ?? null,
  parentId: q.parent_thread_id ?? null,
  afterThreadId: q.cursor ?? null,
  limit: q.limit,
});

export const apiRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/commands/story-backlog/generate-epic',
    operationId: 'generateEpic',
    summary: "Generate an epic's stories (idempotent: an identical active or completed request returns its thread)",
    tag: 'commands',
    body: generateEpicBody,
    status: 202,
    response: commandSchema,
    headers: accepted,
    handle: ({ services, body, traceparent }) => services.threads.generateEpic(body.project_id, body.epic_id, requestOptions(body, traceparent)),
  }),
  route({
    method: 'POST',
    path: '/commands/story-backlog/generate-all',
    operationId: 'generateAll',
    summary: "Generate every epic's stories: one orchestration thread with a child per epic",
    tag: 'commands',
    body: generateAllBody,
    status: 202,
    response: commandSchema,
    headers: accepted,
    handle: ({ services, body, traceparent }) => services.threads.generateAll(body.project_id, requestOptions(body, traceparent)),
  }),
  route({
    method: 'POST',
    path: '/commands/run/{operation}',
    operationId: 'runOperation',
    summary:
      'Run any operation with an input (as `combine run <operation> --input …`; idempotent: an identical active or completed request returns its thread). An input its schema refuses is a 400 naming each field; nothing is stored',
    tag: 'commands',
    params: operationParams,
    body: runBody,
    inputOfOperation: true,
    status: 202,
    response: commandSchema,
    headers: accepted,
    handle: ({ services, params, body, traceparent }) => services.threads.run(params.operation, body.input, requestOptions(body, traceparent)),
  }),
  route({
    method: 'GET',
    path: '/operations',
    operationId: 'listOperations',
    summary: 'The operations this daemon runs, built-in and loaded from modules (as `combine operations --json`)',
    tag: 'operations',
    status: 200,
    response: z.array(operationSummarySchema),
    handle: ({ services }) => services.threads.operations(),
  }),
  route({
    method: 'GET',
    path: '/operations/{operation}',
    operationId: 'getOperation',
    summary: 'One operation: its input and output schemas, model, priority and retry (as `combine operations show <name> --json`)',
    tag: 'operations',
    params: operationParams,
    status: 200,
    response: operationDetailSchema,
    handle: ({ services, params }) => services.threads.operation(params.operation),
  }),
  route({
    method: 'GET',
    path: '/threads/{thread_id}',
    operationId: 'getThread',
    summary: 'One thread (as `combine thread <id> --json`)',
    tag: 'threads',
    params: threadParams,
    status: 200,
    response: threadDetailSchema,
    handle: async ({ services, params }) => {
      const { work_items: _items, ...view } = await services.threads.get(params.thread_id);
      return view;
    },
  }),
  route({
    method: 'GET',
    path: '/threads/{thread_id}/ledger',
    operationId: 'getThreadLedger',
    summary: "A thread's ledger entries, oldest first (as `combine ledger <id> --json`)",
    tag: 'threads',
    params: threadParams,
    status: 200,
    response: z.array(ledgerEntrySchema),
    handle: ({ services, params }) => services.ledger.thread(params.thread_id),
  }),
  route({
    method: 'POST',
    path: '/threads/{thread_id}/retry',
    operationId: 'retryThread',
    summary: 'Retry a failed thread with a new work item (as `combine retry`)',
    tag: 'threads',
    params: threadParams,
    status: 200,
    response: threadSchema,
    handle: ({ services, params }) => services.threads.retry(params.thread_id),
  }),
  route({
    method: 'POST',
    path: '/threads/{thread_id}/cancel',
    operationId: 'cancelThread',
    summary: 'Cancel a thread: queued work ends, calls in flight are aborted (as `combine cancel`)',
    tag: 'threads',
    params: threadParams,
    status: 200,
    response: threadSchema,
    handle: ({ services, params }) => services.threads.cancel(params.thread_id),
  }),
  route({
    method: 'GET',
    path: '/threads',
    operationId: 'listThreads',
    summary: 'Threads, newest first, one page (as `combine threads --json`)',
    tag: 'threads',
    query: threadsQuery,
    status: 200,
    response: z.array(threadSchema),
    headers: (list: ThreadView[], { query }) => nextPage('/threads', query, list, query.limit),
    handle: ({ services, query }) => services.threads.list(threadFilter(query, query.project_id ?? null)),
  }),
  route({
    method: 'GET',
    path: '/projects/{project_id}/threads',
    operationId: 'listProjectThreads',
    summary: "A project's threads, newest first (`?active=true`: open and running only)",
    tag: 'threads',
    params: projectParams,
    query: projectThreadsQuery,
    status: 200,
    response: z.array(threadSchema),
    headers: (list: ThreadView[], { params, query }) => nextPage(`/projects/${encodeURIComponent(params.project_id)}/threads`, query, list, query.limit),
    handle: async ({ services, params, query }) => {
      await services.projects.get(params.project_id); // 404 for an unknown project, not an empty list
      return services.threads.list(threadFilter(query, params.project_id));
    },
  }),
  route({
    method: 'GET',
    path: '/projects',
    operationId: 'listProjects',
    summary: 'Every project (as `combine project list --json`)',
    tag: 'projects',
    status: 200,
    response: z.array(projectSchema),
    handle: ({ services }) => services.projects.list(),
  }),
  route({
    method: 'GET',
    path: '/projects/{project_id}',
    operationId: 'getProject',
    summary: 'One project and its epics (as `combine project show --json`)',
    tag: 'projects',
    params: projectParams,
    status: 200,
    response: projectSchema,
    handle: ({ services, params }) => services.projects.get(params.project_id),
  }),
  route({
    method: 'GET',
    path: '/projects/{project_id}/documents',
    operationId: 'listDocuments',
    summary: "A project's documents without their content: type, key, version, last change",
    tag: 'projects',
    params: projectParams,
    status: 200,
    response: z.array(documentHeadSchema),
    handle: ({ services, params }) => services.projects.documents(params.project_id),
  }),
  route({
    method: 'GET',
    path: '/projects/{project_id}/documents/{doc_type}',
    operationId: 'getDocument',
    summary: "A project's document: its current version and content",
    tag: 'projects',
    params: documentParams,
    query: documentQuery,
    status: 200,
    response: documentSchema,
    handle: ({ services, params, query }) => services.projects.document(params.project_id, params.doc_type, query.key ?? null),
  }),
  route({
    method: 'GET',
    path: '/usage',
    operationId: 'getUsage',
    summary: 'Tokens and cost per project and UTC day, with budgets (as `combine usage --json`)',
    tag: 'daemon',
    query: usageQuery,
    status: 200,
    response: usageReportSchema,
    handle: ({ services, query }) => services.admin.usage(query.project_id ?? null),
  }),
  route({
    method: 'GET',
    path: '/health',
    operationId: 'getHealth',
    summary: 'Liveness and readiness, with the provider breakers (as `combine health --json`)',
    tag: 'daemon',
    status: 200,
    response: healthSchema,
    otherStatus: { status: 503, description: 'unready (the same body): a check failed', when: (h: { ready: boolean }) => !h.ready },
    handle: ({ services }) => services.admin.health(),
  }),
  route({
    method: 'GET',
    path: '/schedules',
    operationId: 'listSchedules',
    summary: 'Schedules (as `combine schedule list --json`)',
    tag: 'daemon',
    query: schedulesQuery,
    status: 200,
    response: z.array(scheduleSchema),
    handle: ({ services, query }) => services.schedules.list(query.all),
  }),
  route({
    method: 'GET',
    path: '/schedules/{schedule_id}/runs',
    operationId: 'listScheduleRuns',
    summary: "A schedule's runs, newest first (as `combine schedule runs <id> --json`)",
    tag: 'daemon',
    params: scheduleParams,
    query: runsQuery,
    status: 200,
    response: z.array(runSchema),
    handle: ({ services, params, query }) => services.schedules.runs(params.schedule_id, query.limit),
  }),
];
