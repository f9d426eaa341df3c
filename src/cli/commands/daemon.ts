/** `combine daemon start | stop | status | run`. */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import type { runDaemon as RunDaemon } from '../../daemon/main.js';
import { probeSocket, toCliError, connectHttp } from '../client.js';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { daemonRunPorts, parsePort } from '../../core/port.js';
import { CALL_TIMEOUT_MS, readDaemonPid, startDaemon, waitForExit } from '../daemon-control.js';
import { capLowersHeapLimit } from '../daemon-heap.js';
import { homeFiles } from '../home.js';
import { EXIT, print } from '../output.js';
import { renderUnit, UNIT_NAME, userUnitDir } from '../systemd-unit.js';
import { CliError } from '../../core/errors.js';

/** `daemon run` arguments for the ports a start was asked for. */
function portArgs(metricsPort: number | null, httpPort: number | null): string[] {
  return [...(metricsPort === null ? [] : ['--metrics-port', String(metricsPort)]), ...(httpPort === null ? [] : ['--http-port', String(httpPort)])];
}

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
const describeStatus = (s: Status) =>
  `running: pid ${s.pid}, version ${s.version}, up ${s.uptime_s}s\n  socket   ${s.socket}\n  database ${s.db_path}${s.http ? `\n  http     ${s.http.url} (combine ui prints the link with the token)` : ''}`;

export function daemonCommand(getHome: () => string): Command {
  const cmd = new Command('daemon').description('start, stop and inspect the background daemon');

  withCommonOptions(cmd.command('start').description('start the daemon in the background (returns once it answers)'), false)
    .option('--metrics-port <port>', 'also serve Prometheus /metrics on 127.0.0.1:<port>')
    .option('--http-port <port>', 'also serve the HTTP API and dashboard on 127.0.0.1:<port> (0: any free port)')
    .addHelpText(
      'after',
      '\nExamples:\n  combine daemon start\n  combine daemon start --metrics-port 9464   # then: curl http://127.0.0.1:9464/metrics\n  combine daemon start --http-port 7878      # then: combine ui',
    )
    .action(async (opts: CommonOptions & { metricsPort?: string; httpPort?: string }) => {
      const home = getHome();
      const httpPort = parsePort(opts.httpPort, '--http-port', true);
      const { started } = await startDaemon(home, process.env, portArgs(parsePort(opts.metricsPort), httpPort));
      // Already running: HTTP can still be turned on (the metrics port is fixed at start).
      if (!started && httpPort !== null) {
        await connectHttp(homeFiles(home).socket)
          .client.daemon.serveHttp.mutate({ port: httpPort }, { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) })
          .catch((err: unknown) => {
            throw toCliError(err);
          });
      }
      const status = await daemonStatus(home);
      await print(opts, { ...status, started }, () => (started ? `started; ${describeStatus(status)}` : `already ${describeStatus(status)}`));
    });

  withCommonOptions(cmd.command('stop').description('stop claiming, let in-flight calls finish (up to the drain timeout), exit'), false).action(
    async (opts: CommonOptions) => {
      const home = getHome();
      const files = homeFiles(home);
      if (!(await probeSocket(files.socket))) {
        await print(opts, { stopped: false, running: false }, () => 'the daemon is not running');
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
      await print(opts, { stopped: true, pid }, () => `stopped${pid ? ` (pid ${pid})` : ''}`);
    },
  );

  withCommonOptions(cmd.command('status').description('show whether the daemon runs, and where (exit 3 when it does not)'), false).action(
    async (opts: CommonOptions) => {
      const status = await daemonStatus(getHome());
      await print(opts, status, () => describeStatus(status));
    },
  );

  cmd
    .command('run')
    .description('run the daemon in the foreground (for systemd, containers and debugging)')
    .option('--metrics-port <port>', 'also serve Prometheus /metrics on 127.0.0.1:<port>')
    .option('--http-port <port>', 'also serve the HTTP API and dashboard on 127.0.0.1:<port> (0: any free port)')
    .action(async (opts: { metricsPort?: string; httpPort?: string }) => {
      const ports = daemonRunPorts(opts.metricsPort, opts.httpPort);
      const mod = (await import(new URL('./daemon.js', import.meta.url).href)) as {
        runDaemon: typeof RunDaemon;
        DaemonStartError: new (...a: any[]) => Error & { exitCode: number };
      };
      try {
        await mod.runDaemon({ home: getHome(), ...ports });
      } catch (err) {
        if (err instanceof mod.DaemonStartError) throw new CliError(err.message, err.exitCode as 1 | 2);
        throw err;
      }
    });

  withCommonOptions(
    cmd.command('install').description('write a systemd user unit that runs the daemon (as `combine daemon run` does), and say how to enable it'),
    false,
  )
    .option('--metrics-port <port>', 'have the service serve /metrics on 127.0.0.1:<port>')
    .option('--force', 'overwrite an existing unit file')
    .option('--print', 'print the unit to stdout instead of writing it')
    .addHelpText('after', '\nExamples:\n  combine daemon install\n  combine daemon install --metrics-port 9464 --force\n  combine daemon install --print')
    .action(async (opts: CommonOptions & { metricsPort?: string; force?: boolean; print?: boolean }) => {
      const home = getHome();
      const unit = renderUnit({
        node: process.execPath,
        distDir: fileURLToPath(new URL('.', import.meta.url)),
        home,
        metricsPort: parsePort(opts.metricsPort),
        capHeap: await capLowersHeapLimit(),
      });
      if (opts.print) {
        process.stdout.write(opts.json ? `${JSON.stringify({ unit }, null, 2)}\n` : unit);
        return;
      }
      const dir = userUnitDir();
      const path = join(dir, UNIT_NAME);
      if (existsSync(path) && !opts.force) throw new CliError(`${path} already exists; use --force to overwrite it`, EXIT.FAILED);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path, unit);
      const next = [
        'combine daemon stop                      # the service must be the only daemon for this home',
        'systemctl --user daemon-reload',
        `systemctl --user enable --now ${UNIT_NAME}`,
        'loginctl enable-linger "$USER"           # optional: keep it running while you are logged out',
      ];
      await print(opts, { path, home, unit, next }, () =>
        [`wrote ${path}`, `Put OPENAI_API_KEY=… in ${join(home, 'daemon.env')} (chmod 600), then:`, ...next.map((l) => `  ${l}`)].join('\n'),
      );
    });

  return cmd;
}
