/**
 * The tRPC router: the daemon's whole API. Queries and mutations travel over HTTP on the Unix socket,
 * subscriptions (`follow`) over WebSocket on the same socket. Input is validated here (zod); errors a
 * user caused carry `data.combine` = {kind, code} so the CLI can choose its exit code.
 */
import { initTRPC, TRPCError } from '@trpc/server';
import { z } from 'zod';
import { THREAD_STATUSES } from '../domain/states.js';
import type { HttpService } from './http/service.js';
import type { Services } from './services/index.js';
import type { RequestOptions } from './services/threads.js';
import { CommandError } from '../core/errors.js';
import { findUnstorableText } from '../domain/storable-text.js';
import { parseTraceparent } from '../core/trace-context.js';

export interface RouterContext {
  services: Services;
  /** Asks the daemon to shut down gracefully after answering. */
  requestStop: () => void;
  /** The HTTP API and dashboard (`combine ui`). */
  http: HttpService;
}

const t = initTRPC.context<RouterContext>().create({
  // Never send a server stack trace to a client.
  isDev: false,
  errorFormatter({ shape, error }) {
    const cause = error.cause;
    if (error.code === 'PAYLOAD_TOO_LARGE') {
      // A body without a declared length that grew past the limit while it was read (server-limits.ts).
      const message = "the request body is over this endpoint's size limit (api.max_body_bytes; api.max_import_bytes for imports)";
      return { ...shape, message, data: { ...shape.data, combine: { kind: 'BAD_REQUEST', code: 'PAYLOAD_TOO_LARGE' } } };
    }
    const combine = cause instanceof CommandError ? { kind: cause.kind, code: cause.code ?? null } : null;
    return { ...shape, data: { ...shape.data, combine } };
  },
});

/**
 * Input holding U+0000 or a lone surrogate is refused, naming the field (domain/storable-text.ts). A refusal the user caused
 * (`CommandError`) answers with its own code — HTTP 400, 404 or 409 — instead of tRPC's default for a
 * thrown error (500 INTERNAL_SERVER_ERROR), so any client can tell bad input and refused operations
 * from a daemon failure. The cause stays attached for `data.combine`.
 */
const procedure = t.procedure.use(async ({ next, getRawInput }) => {
  // Refused here for every procedure at once, before any of it reads or writes (domain/storable-text.ts).
  const unstorable = findUnstorableText(await getRawInput());
  if (unstorable !== null) {
    const { path, problem, code } = unstorable;
    const cause = new CommandError('BAD_REQUEST', `${path}: ${problem}`, code, [{ field: path, message: problem }]);
    throw new TRPCError({ code: 'BAD_REQUEST', message: cause.message, cause });
  }
  const result = await next();
  if (!result.ok && result.error.cause instanceof CommandError) {
    throw new TRPCError({ code: result.error.cause.kind, message: result.error.cause.message, cause: result.error.cause });
  }
  return result;
});

const id = z.string().min(1).max(200);
const operationName = z.string().min(1).max(64);
/** What every request of work may say besides what it asks for. */
const requestInput = z.object({
  force: z.boolean().default(false),
  deadline_ms: z.number().int().positive().nullable().default(null),
  created_by: z.string().max(200).nullable().default(null),
  /** The caller's W3C trace context: the command joins that trace. */
  traceparent: z
    .string()
    .max(512)
    .refine((v) => parseTraceparent(v) !== null, 'not a W3C traceparent (00-<32 hex trace id>-<16 hex span id>-<2 hex flags>)')
    .nullable()
    .default(null),
});
const generateInput = requestInput.extend({ project_id: id });

function requestOptions(input: z.infer<typeof requestInput>): RequestOptions {
  return { force: input.force, deadlineMs: input.deadline_ms, createdBy: input.created_by, traceparent: input.traceparent };
}

export const appRouter = t.router({
  daemon: t.router({
    status: procedure.query(({ ctx }) => ({ ...ctx.services.admin.status(), http: ctx.http.current() })),
    /** Serves the HTTP API and dashboard unless it already does (`combine ui`); port null: config or 7878. */
    serveHttp: procedure
      .input(z.object({ port: z.number().int().min(0).max(65535).nullable().default(null) }))
      .mutation(({ ctx, input }) => ctx.http.serve(input.port)),
    stop: procedure.mutation(({ ctx }) => {
      ctx.requestStop();
      return { stopping: true, pid: process.pid };
    }),
  }),
  health: procedure.query(({ ctx }) => ctx.services.admin.health()),
  stats: procedure.query(({ ctx }) => ctx.services.admin.stats()),
  metrics: procedure.query(({ ctx }) => ctx.services.admin.metrics()),

  project: t.router({
    import: procedure.input(z.object({ file: z.unknown() })).mutation(({ ctx, input }) => ctx.services.projects.import(input.file)),
    list: procedure.query(({ ctx }) => ctx.services.projects.list()),
    show: procedure.input(z.object({ project_id: id })).query(({ ctx, input }) => ctx.services.projects.get(input.project_id)),
  }),
  backlog: procedure.input(z.object({ project_id: id })).query(({ ctx, input }) => ctx.services.projects.backlog(input.project_id)),
  /** Any document (`combine doc`, `GET /projects/{id}/documents/{doc_type}`). */
  document: procedure
    .input(z.object({ project_id: id, doc_type: id, key: id.nullable().default(null) }))
    .query(({ ctx, input }) => ctx.services.projects.document(input.project_id, input.doc_type, input.key)),

  generate: t.router({
    epic: procedure
      .input(generateInput.extend({ epic_id: id }))
      .mutation(({ ctx, input }) => ctx.services.threads.generateEpic(input.project_id, input.epic_id, requestOptions(input))),
    /** What generate-all would cost at most; enqueues nothing. */
    allDryRun: procedure.input(z.object({ project_id: id })).query(({ ctx, input }) => ctx.services.threads.dryRunGenerateAll(input.project_id)),
    all: procedure.input(generateInput).mutation(({ ctx, input }) => ctx.services.threads.generateAll(input.project_id, requestOptions(input))),
  }),

  /** Any operation: `combine run` (and the shorthands' generic path). */
  run: procedure
    .input(requestInput.extend({ operation: operationName, input: z.unknown() }))
    .mutation(({ ctx, input }) => ctx.services.threads.run(input.operation, input.input, requestOptions(input))),
  runDryRun: procedure
    .input(z.object({ operation: operationName, input: z.unknown() }))
    .query(({ ctx, input }) => ctx.services.threads.dryRun(input.operation, input.input)),
  operations: t.router({
    list: procedure.query(({ ctx }) => ctx.services.threads.operations()),
    show: procedure.input(z.object({ name: operationName })).query(({ ctx, input }) => ctx.services.threads.operation(input.name)),
  }),
  thread: procedure.input(z.object({ thread_id: id })).query(({ ctx, input }) => ctx.services.threads.get(input.thread_id)),
  /** An orchestration's children, each with its latest error: what `thread` and a failed follow list. */
  threadChildren: procedure.input(z.object({ thread_id: id })).query(({ ctx, input }) => ctx.services.threads.children(input.thread_id)),
  threads: procedure
    .input(
      z.object({
        active: z.boolean().default(false),
        project_id: id.nullable().default(null),
        limit: z.number().int().min(1).max(10_000).default(100),
        status: z.array(z.enum(THREAD_STATUSES)).max(THREAD_STATUSES.length).default([]),
        kind: id.nullable().default(null),
        parent_thread_id: id.nullable().default(null),
        since_ms: z.number().int().positive().nullable().default(null),
        /** The id of the last thread of the previous page. */
        cursor: id.nullable().default(null),
      }),
    )
    .query(({ ctx, input }) =>
      ctx.services.threads.list({
        active: input.active,
        projectId: input.project_id,
        limit: input.limit,
        statuses: input.status,
        kind: input.kind,
        parentId: input.parent_thread_id,
        sinceMs: input.since_ms,
        afterThreadId: input.cursor,
      }),
    ),
  // The thread is looked up before the stream starts, so an unknown id is a 404 like everywhere else.
  follow: procedure.input(z.object({ thread_id: id })).subscription(async ({ ctx, input, signal }) => {
    await ctx.services.threads.get(input.thread_id);
    return ctx.services.threads.follow(input.thread_id, signal);
  }),
  retry: procedure.input(z.object({ thread_id: id })).mutation(({ ctx, input }) => ctx.services.threads.retry(input.thread_id)),
  replay: procedure
    .input(z.object({ thread_id: id, apply: z.boolean().default(false), response_seq: z.number().int().positive().nullable().default(null) }))
    .mutation(({ ctx, input }) => ctx.services.threads.replay(input.thread_id, { apply: input.apply, responseSeq: input.response_seq })),
  cancel: procedure.input(z.object({ thread_id: id })).mutation(({ ctx, input }) => ctx.services.threads.cancel(input.thread_id)),

  usage: procedure.input(z.object({ project_id: id.nullable().default(null) })).query(({ ctx, input }) => ctx.services.admin.usage(input.project_id)),
  config: t.router({
    show: procedure.query(({ ctx }) => ctx.services.admin.config()),
  }),
  prune: procedure
    .input(z.object({ older_than_ms: z.number().int().min(0), dry_run: z.boolean().default(false) }))
    .mutation(({ ctx, input }) => ctx.services.admin.prune(input.older_than_ms, input.dry_run)),
  schedule: t.router({
    add: procedure
      .input(
        z.object({
          project_id: id,
          operation: operationName,
          input: z.record(z.string(), z.unknown()).default({}),
          cron: z.string().min(1).max(200),
          timezone: z.string().min(1).max(100).default('UTC'),
          catch_up: z.string().min(1).max(20).default('latest'),
        }),
      )
      .mutation(({ ctx, input }) => ctx.services.schedules.add(input)),
    list: procedure.input(z.object({ all: z.boolean().default(false) })).query(({ ctx, input }) => ctx.services.schedules.list(input.all)),
    pause: procedure
      .input(z.object({ schedule_id: id }))
      .mutation(async ({ ctx, input }) => ctx.services.schedules.pause(await ctx.services.schedules.scheduleId(input.schedule_id))),
    resume: procedure
      .input(z.object({ schedule_id: id }))
      .mutation(async ({ ctx, input }) => ctx.services.schedules.resume(await ctx.services.schedules.scheduleId(input.schedule_id))),
    remove: procedure
      .input(z.object({ schedule_id: id }))
      .mutation(async ({ ctx, input }) => ctx.services.schedules.remove(await ctx.services.schedules.scheduleId(input.schedule_id))),
    runs: procedure
      .input(z.object({ schedule_id: id.nullable().default(null), limit: z.number().int().min(1).max(10_000).default(50) }))
      .query(async ({ ctx, input }) =>
        ctx.services.schedules.runs(input.schedule_id === null ? null : await ctx.services.schedules.scheduleId(input.schedule_id), input.limit),
      ),
  }),
  briefing: procedure
    .input(z.object({ project_id: id, date: z.string().max(20).nullable().default(null) }))
    .query(({ ctx, input }) => ctx.services.projects.briefing(input.project_id, input.date)),

  ledger: t.router({
    thread: procedure.input(z.object({ thread_id: id })).query(({ ctx, input }) => ctx.services.ledger.thread(input.thread_id)),
    verify: procedure.query(({ ctx }) => ctx.services.ledger.verify()),
    export: procedure
      .input(
        z
          .object({ thread_id: id.nullable().default(null), project_id: id.nullable().default(null) })
          .refine((v) => (v.thread_id === null) !== (v.project_id === null), { message: 'give a thread id or --project, not both' }),
      )
      .query(({ ctx, input }) => ctx.services.ledger.export({ threadId: input.thread_id, projectId: input.project_id })),
    import: procedure.input(z.object({ text: z.string() })).mutation(({ ctx, input }) => ctx.services.ledger.import(input.text)),
  }),
});

export type AppRouter = typeof appRouter;
