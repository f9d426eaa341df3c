/** `combine project import | list | show`. */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { EXIT, plural, print, table, when } from '../output.js';
import { CliError } from '../../core/errors.js';

/** Reads and parses the file locally: a missing or non-JSON file is an error before any daemon call. */
export function readProjectFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, EXIT.USAGE);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(`${path} is not valid JSON: ${(err as Error).message}`, EXIT.USAGE);
  }
}

export function projectCommand(getHome: () => string): Command {
  const cmd = new Command('project').description('import and inspect projects (their epics are the input of generation)');

  withCommonOptions(
    cmd
      .command('import')
      .argument('<file.json>', 'a project: {"id","name","epics":[{"id","title","description"}]}')
      .description('create a project, or update its epics when the id exists; invalid files store nothing')
      .addHelpText('after', '\nExample:\n  combine project import examples/acme.json'),
  ).action(async (file: string, opts: CommonOptions) => {
    const json = readProjectFile(file);
    const result = await withDaemon(getHome(), opts, ({ client }, signal) => client.project.import.mutate({ file: json }, { signal }));
    await print(opts, result, () => `${result.result} project ${result.project_id}: ${plural(result.epics, 'epic')} (architecture v${result.version})`);
  });

  withCommonOptions(cmd.command('list').description('list projects')).action(async (opts: CommonOptions) => {
    const projects = await withDaemon(getHome(), opts, ({ client }, signal) => client.project.list.query(undefined, { signal }));
    await print(opts, projects, () =>
      projects.length === 0
        ? 'no projects (import one with `combine project import <file.json>`)'
        : table([['PROJECT', 'NAME', 'EPICS', 'CREATED'], ...projects.map((p) => [p.project_id, p.name, String(p.epics.length), when(p.created_at)])]),
    );
  });

  withCommonOptions(cmd.command('show').argument('<project-id>').description('show a project and its epics')).action(
    async (projectId: string, opts: CommonOptions) => {
      const p = await withDaemon(getHome(), opts, ({ client }, signal) => client.project.show.query({ project_id: projectId }, { signal }));
      await print(opts, p, () =>
        [`${p.name} (${p.project_id}), architecture v${p.architecture_version}`, '', ...p.epics.map((e) => `  ${e.id.padEnd(12)} ${e.title}`)].join('\n'),
      );
    },
  );
  return cmd;
}
