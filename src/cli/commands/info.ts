/** `combine backlog`, `combine health`, `combine stats`, `combine metrics`. */
import { Command } from 'commander';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { color, EXIT, plural, print, shortTime, statusText, when } from '../output.js';

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
      await print(opts, b, () => renderBacklog(b));
    },
  );

  const health = withCommonOptions(
    new Command('health').description("the daemon's liveness and readiness, and whether the provider breaker is open (exit 0 when ready, 1 when not)"),
  ).action(async (opts: CommonOptions) => {
    const h = await withDaemon(getHome(), opts, ({ client }, signal) => client.health.query(undefined, { signal }));
    await print(opts, h, () => {
      const c = color();
      const lines = [statusText(h.status), ...Object.entries(h.checks).map(([k, v]) => `  ${v ? c.green('ok  ') : c.red('FAIL')} ${k}`)];
      // Health is about the daemon; an open breaker is the one provider state it reports, and says why.
      for (const [endpoint, b] of Object.entries(h.breakers)) {
        if (b.state === 'open') {
          lines.push(
            '',
            `provider breaker OPEN for ${endpoint}: ${plural(b.consecutive_failures, 'failure')} in a row; no calls until ${b.open_until ? when(b.open_until) : 'it half-opens'}`,
            '  queued work waits (nothing is lost); check the provider with `combine doctor`',
          );
        } else if (b.state === 'half_open') lines.push('', `provider breaker half-open for ${endpoint}: one probe call decides`);
      }
      return lines.join('\n');
    });
    if (!h.ready) process.exitCode = EXIT.FAILED;
  });

  const stats = withCommonOptions(new Command('stats').description('counts of threads, work items, ledger entries, calls and tokens')).action(
    async (opts: CommonOptions) => {
      const s = await withDaemon(getHome(), opts, ({ client }, signal) => client.stats.query(undefined, { signal }));
      const fmt = (o: Record<string, number>) =>
        Object.entries(o)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || 'none';
      await print(opts, s, () =>
        [
          `threads         ${fmt(s.threads)}`,
          `work items      ${fmt(s.work_items)}`,
          `in flight       ${s.in_flight}`,
          `ledger entries  ${s.ledger_entries}`,
          `provider calls  ${s.calls} (${s.tokens.prompt} prompt + ${s.tokens.completion} completion tokens; as counted by usage and thread)`,
        ].join('\n'),
      );
    },
  );

  const metrics = withCommonOptions(new Command('metrics').description('Prometheus exposition text')).action(async (opts: CommonOptions) => {
    const text = await withDaemon(getHome(), opts, ({ client }, signal) => client.metrics.query(undefined, { signal }));
    await print(opts, { text }, () => text.trimEnd());
  });
  return [backlog, health, stats, metrics];
}
