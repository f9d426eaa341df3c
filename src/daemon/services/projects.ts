/**
 * The project service: importing a project file, and reading projects and their documents (the story
 * backlog, any operation's document, the briefing of a date).
 */
import { CommandError } from '../../core/errors.js';
import type { Sql } from '../../core/sql.js';
import { listDocumentHeads, listProjects } from '../../db/projects.js';
import type { OperationRegistry } from '../../operations/registry.js';
import type { Write } from '../engine/tx.js';
import { importProject } from './commands.js';
import type { PressureMonitor } from '../pressure/monitor.js';
import { readBriefing, readDocument } from './documents.js';
import { backlogView, documentHeadView, documentView, projectView } from '../views.js';

const noProject = (projectId: string) => new CommandError('NOT_FOUND', `no project "${projectId}" (see \`combine project list\`)`);

export class ProjectService {
  constructor(
    private readonly reader: Sql,
    private readonly write: Write,
    private readonly operations: OperationRegistry,
    private readonly pressure: Pick<PressureMonitor, 'assertAcceptingCommands'>,
  ) {}

  /** Creates the project, or writes its epics as the architecture's next version; validates everything first. */
  import(file: unknown) {
    this.pressure.assertAcceptingCommands();
    return this.write((tx) => importProject(tx, file));
  }

  async list() {
    const views = [];
    for (const p of await listProjects(this.reader)) views.push((await projectView(this.reader, p.id))!);
    return views;
  }

  async get(projectId: string) {
    const view = await projectView(this.reader, projectId);
    if (!view) throw noProject(projectId);
    return view;
  }

  async backlog(projectId: string) {
    const view = await backlogView(this.reader, projectId);
    if (!view) throw noProject(projectId);
    return view;
  }

  /** Any document of a project: `key` null is the type's one document, or the newest keyed one. */
  async document(projectId: string, docType: string, key: string | null) {
    return documentView(await readDocument(this.reader, this.operations, { projectId, docType, key }));
  }

  /** A project's documents, without their content (the dashboard's project page, `GET /projects/{id}/documents`). */
  async documents(projectId: string, limit = 500) {
    await this.get(projectId); // 404 for an unknown project, not an empty list
    return (await listDocumentHeads(this.reader, projectId, limit)).map(documentHeadView);
  }

  /** `combine briefing`: a project's briefing document for a date (the newest when null). */
  async briefing(projectId: string, date: string | null) {
    return await readBriefing(this.reader, this.operations, projectId, date);
  }
}
