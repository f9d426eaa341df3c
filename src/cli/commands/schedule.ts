/** `combine schedule add | list | pause | resume | remove | runs`. */
import { Command } from 'commander';
import type { RunView, ScheduleView } from '../../daemon/scheduler/views.js';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { EXIT, print, shortId, shortTime, table } from '../output.js';
import { readInput } from './operations.js';
import { CliError } from '../../core/errors.js';

interface AddOptions extends CommonOptions {
  project: string;
  cron: string;
  operation: string;
  input?: string;
  inputFile?: string;
  tz: string;
  catchUp: string;
}

function describeSchedule(s: ScheduleView): string {
  return [
    `schedule ${s.schedule_id} (${s.status})`,
    `  ${s.operation} of ${s.project_id}, cron "${s.cron}" in ${s.timezone}, missed periods: ${s.catch_up}`,
    `  next run  ${shortTime(s.next_run_at)}${s.next_run_at ? ' UTC' : ''}`,
    `  last run  ${s.last_run ? `${shortTime(s.last_run.period_key)} UTC ${s.last_run.status}` : '-'}`,
  ].join('\n');
}

function schedulesTable(list: ScheduleView[]): string {
  if (list.length === 0) return 'no schedules (add one with `combine schedule add --help`)';
  return table([
    ['SCHEDULE', 'PROJECT', 'OPERATION', 'CRON', 'TZ', 'STATUS', 'NEXT (UTC)', 'LAST RUN'],
    ...list.map((s) => [
      shortId(s.schedule_id),
      s.project_id,
      s.operation,
      s.cron,
      s.timezone,
      s.status,
      shortTime(s.next_run_at),
      s.last_run ? `${shortTime(s.last_run.period_key)} ${s.last_run.status}` : '-',
    ]),
  ]);
}

function runsTable(runs: RunView[]): string {
  if (runs.length === 0) return 'no runs yet';
  return table([
    ['RUN', 'SCHEDULE', 'PERIOD (UTC)', 'STATUS', 'CLAIMS', 'THREAD', 'TOKENS', 'ERROR'],
    ...runs.map((r) => [
      shortId(r.run_id),
      shortId(r.schedule_id),
      shortTime(r.period_key),
      r.ready ? r.status : 'pending (not ready)',
      String(r.claims),
      r.thread_id ? `${shortId(r.thread_id)} ${r.thread_status ?? ''}`.trim() : '-',
      r.usage ? String(r.usage.total_tokens) : '-',
      r.error ?? '',
    ]),
  ]);
}

export function scheduleCommand(getHome: () => string): Command {
  const cmd = new Command('schedule').description('run operations on a cron schedule (each period runs once, however many daemons share the database)');

  withCommonOptions(
    cmd
      .command('add')
      .description('add a schedule; its first run is at the first fire time from now')
      .requiredOption('--project <id>', 'project id')
      .requiredOption('--cron <expr>', 'cron expression: 5 fields (minute hour day month weekday), or 6 with seconds first')
      .requiredOption('--operation <op>', 'what to run: briefing | generate-all | any operation (see `combine operations`)')
      .option('--input <json>', 'the input of each run (JSON); "{{date}}" is the period\'s date, project_id defaults to --project')
      .option('--input-file <path>', 'read the input from a JSON file')
      .option('--tz <iana>', 'time zone the expression is read in (e.g. Europe/Berlin)', 'UTC')
      .option('--catch-up <policy>', 'periods missed while no daemon ran: latest (run the newest once) | skip', 'latest')
      .addHelpText(
        'after',
        [
          '',
          'Examples:',
          '  combine schedule add --project acme --operation briefing --cron "0 8 * * 1-5" --tz Europe/Berlin',
          '  combine schedule add --project acme --operation generate-all --cron "30 2 * * *" --catch-up skip --json',
          '  combine schedule add --project acme --operation weekly_report --input \'{"week_of":"{{date}}"}\' --cron "0 8 * * 1"',
        ].join('\n'),
      ),
  ).action(async (opts: AddOptions) => {
    const input = readInput(opts);
    if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new CliError('--input: must be a JSON object', EXIT.USAGE);
    const s = await withDaemon(getHome(), opts, ({ client }, signal) =>
      client.schedule.add.mutate(
        {
          project_id: opts.project,
          operation: opts.operation,
          input: input as Record<string, unknown>,
          cron: opts.cron,
          timezone: opts.tz,
          catch_up: opts.catchUp,
        },
        { signal },
      ),
    );
    await print(opts, s, () => `${describeSchedule(s)}\n  upcoming  ${s.upcoming.map((t) => shortTime(t)).join(', ')} UTC`);
  });

  withCommonOptions(
    cmd
      .command('list')
      .description('list schedules with their next and last runs')
      .option('--all', 'include removed schedules')
      .addHelpText('after', '\nExamples:\n  combine schedule list\n  combine schedule list --all --json'),
  ).action(async (opts: CommonOptions & { all?: boolean }) => {
    const list = await withDaemon(getHome(), opts, ({ client }, signal) => client.schedule.list.query({ all: !!opts.all }, { signal }));
    await print(opts, list, () => schedulesTable(list));
  });

  const verbs = [
    ['pause', 'stop running periods until resumed (a run already started still ends)'],
    ['resume', 'run periods again from now on (periods that passed while paused are not caught up)'],
    ['remove', 'stop the schedule for good; its runs stay listed'],
  ] as const;
  for (const [verb, description] of verbs) {
    withCommonOptions(
      cmd.command(verb).argument('<schedule-id>').description(description).addHelpText('after', `\nExample:\n  combine schedule ${verb} 3f2c9a1e-…`),
    ).action(async (scheduleId: string, opts: CommonOptions) => {
      const s = await withDaemon(getHome(), opts, ({ client }, signal) => client.schedule[verb].mutate({ schedule_id: scheduleId }, { signal }));
      await print(opts, s, () => describeSchedule(s));
    });
  }

  withCommonOptions(
    cmd
      .command('runs')
      .argument('[schedule-id]', 'only this schedule')
      .description('list runs, newest period first; a pending run is in flight and not ready')
      .option('--limit <n>', 'at most this many', '50')
      .addHelpText('after', '\nExamples:\n  combine schedule runs\n  combine schedule runs 3f2c9a1e-… --json'),
  ).action(async (scheduleId: string | undefined, opts: CommonOptions & { limit?: string }) => {
    const limit = Number(opts.limit);
    if (!Number.isInteger(limit) || limit < 1) throw new CliError(`--limit: "${opts.limit}" is not a positive integer`, EXIT.USAGE);
    const runs = await withDaemon(getHome(), opts, ({ client }, signal) => client.schedule.runs.query({ schedule_id: scheduleId ?? null, limit }, { signal }));
    await print(opts, runs, () => runsTable(runs));
  });
  return cmd;
}
