/** `combine daemon start | stop | status | run`. */
import { Command } from 'commander';
import type { runDaemon as RunDaemon } from '../../daemon/main.js';
import { probeSocket, toCliError, connectHttp } from '../client.js';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { CALL_TIMEOUT_MS, readDaemonPid, startDaemon, waitForExit } from '../daemon-control.js';
import { homeFiles } from '../home.js';
import { CliError, EXIT, print } from '../output.js';

async function daemonStatus(home: string) {
  const files = homeFiles(home);
  if (!(await probeSocket(files.socket))) {
    throw new CliError(`the combine daemon is not running for ${home}`, EXIT.UNREACHABLE);
  }
  try {
    return await connectHttp(files.socket).client.daemon.status.query(undefined, { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
  } catch (err) {
    throw toCliError(err);
  }
}

type Status = Awaited<ReturnType<typeof daemonStatus>>;
const describeStatus = (s: Status) => `running: pid ${s.pid}, version ${s.version}, up ${s.uptime_s}s\n  socket   ${s.socket}\n  database ${s.db_path}`;

export function daemonCommand(getHome: () => string): Command {
  const cmd = new Command('daemon').description('start, stop and inspect the background daemon');

  withCommonOptions(cmd.command('start').description('start the daemon in the background (returns once it answers)'), false).action(
    async (opts: CommonOptions) => {
      const home = getHome();
      const { started } = await startDaemon(home);
      const status = await daemonStatus(home);
      print(opts, { ...status, started }, () => (started ? `started; ${describeStatus(status)}` : `already ${describeStatus(status)}`));
    },
  );

  withCommonOptions(cmd.command('stop').description('stop claiming, let in-flight calls finish (up to the drain timeout), exit'), false).action(
    async (opts: CommonOptions) => {
      const home = getHome();
      const files = homeFiles(home);
      if (!(await probeSocket(files.socket))) {
        print(opts, { stopped: false, running: false }, () => 'the daemon is not running');
        return;
      }
      const pid = readDaemonPid(home);
      try {
        await connectHttp(files.socket).client.daemon.stop.mutate(undefined, { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
      } catch (err) {
        throw toCliError(err);
      }
      const exited = pid === null ? true : await waitForExit(pid, 30_000);
      if (!exited) throw new CliError(`the daemon (pid ${pid}) did not exit within 30s`, EXIT.FAILED);
      print(opts, { stopped: true, pid }, () => `stopped${pid ? ` (pid ${pid})` : ''}`);
    },
  );

  withCommonOptions(cmd.command('status').description('show whether the daemon runs, and where (exit 3 when it does not)'), false).action(
    async (opts: CommonOptions) => {
      const status = await daemonStatus(getHome());
      print(opts, status, () => describeStatus(status));
    },
  );

  cmd
    .command('run')
    .description('run the daemon in the foreground (for systemd, containers and debugging)')
    .action(async () => {
      const mod = (await import(new URL('./daemon.js', import.meta.url).href)) as { runDaemon: typeof RunDaemon; DaemonStartError: new (...a: any[]) => Error & { exitCode: number } };
      try {
        await mod.runDaemon({ home: getHome() });
      } catch (err) {
        if (err instanceof mod.DaemonStartError) throw new CliError(err.message, err.exitCode as 1 | 2);
        throw err;
      }
    });

  return cmd;
}
