/** `combine backlog`, `combine health`, `combine stats`, `combine metrics`. */
import { Command } from 'commander';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { EXIT, print, shortTime } from '../output.js';

type Backlog = Awaited<ReturnType<import('../client.js').DaemonClient['backlog']['query']>>;

export function renderBacklog(b: Backlog): string {
  const lines = [`${b.project_name} — story backlog v${b.version} (updated ${shortTime(b.updated_at)})`];
  for (const epic of b.epics) {
    lines.push('', `${epic.epic_id}  ${epic.title}${epic.stories.length === 0 ? '  (no stories yet)' : ''}`);
    epic.stories.forEach((s, i) => {
      lines.push(`  ${i + 1}. ${s.title}`, `     ${s.description}`);
      for (const c of s.acceptance_criteria) lines.push(`     - ${c}`);
    });
  }
  return lines.join('\n');
}

export function infoCommands(getHome: () => string): Command[] {
  const backlog = withCommonOptions(new Command('backlog').argument('<project-id>').description("the project's canonical story backlog")).action(
    async (projectId: string, opts: CommonOptions) => {
      const b = await withDaemon(getHome(), opts, ({ client }, signal) => client.backlog.query({ project_id: projectId }, { signal }));
      print(opts, b, () => renderBacklog(b));
    },
  );

  const health = withCommonOptions(new Command('health').description('liveness and readiness (exit 0 when ready, 1 when not)')).action(
    async (opts: CommonOptions) => {
      const h = await withDaemon(getHome(), opts, ({ client }, signal) => client.health.query(undefined, { signal }));
      print(opts, h, () => [`${h.status}`, ...Object.entries(h.checks).map(([k, v]) => `  ${v ? 'ok  ' : 'FAIL'} ${k}`)].join('\n'));
      if (!h.ready) process.exitCode = EXIT.FAILED;
    },
  );

  const stats = withCommonOptions(new Command('stats').description('counts of threads, work items, ledger entries, calls and tokens')).action(
    async (opts: CommonOptions) => {
      const s = await withDaemon(getHome(), opts, ({ client }, signal) => client.stats.query(undefined, { signal }));
      const fmt = (o: Record<string, number>) => Object.entries(o).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
      print(opts, s, () =>
        [
          `threads         ${fmt(s.threads)}`,
          `work items      ${fmt(s.work_items)}`,
          `in flight       ${s.in_flight}`,
          `ledger entries  ${s.ledger_entries}`,
          `provider calls  ${s.calls} (${s.tokens.prompt} prompt + ${s.tokens.completion} completion tokens)`,
        ].join('\n'),
      );
    },
  );

  const metrics = withCommonOptions(new Command('metrics').description('Prometheus exposition text')).action(async (opts: CommonOptions) => {
    const text = await withDaemon(getHome(), opts, ({ client }, signal) => client.metrics.query(undefined, { signal }));
    print(opts, { text }, () => text.trimEnd());
  });
  return [backlog, health, stats, metrics];
}
