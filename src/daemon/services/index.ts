/**
 * The services the daemon's APIs call — the tRPC router on the socket (router.ts), the HTTP API
 * (http/api.ts) and the dashboard (src/web/). Each is thin: it validates what the transport cannot,
 * runs one writer transaction per command, tells the engine, and shapes the answer (views.ts).
 */
import type { ScheduleService } from '../scheduler/service.js';
import type { AdminService } from './admin.js';
import type { LedgerService } from './ledger.js';
import type { ProjectService } from './projects.js';
import type { ThreadService } from './threads.js';

export interface Services {
  readonly threads: ThreadService;
  readonly projects: ProjectService;
  readonly ledger: LedgerService;
  readonly schedules: ScheduleService;
  readonly admin: AdminService;
}
