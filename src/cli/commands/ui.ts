/** `combine ui`: make sure the daemon serves the dashboard, print its URL (with the token), maybe open it. */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { parsePort } from '../../core/port.js';
import { withDaemon } from '../daemon-control.js';
import { homeFiles } from '../home.js';
import { EXIT, print } from '../output.js';
import { CliError } from '../../core/errors.js';

/** Starts the platform's URL opener, detached; resolves false if it cannot be started. */
async function openBrowser(url: string): Promise<boolean> {
  const { spawn } = await import('node:child_process');
  const [cmd, args] = process.platform === 'darwin' ? ['open', [url]] : process.platform === 'win32' ? ['cmd', ['/c', 'start', '', url]] : ['xdg-open', [url]];
  return new Promise((resolve) => {
    const child = spawn(cmd, args as string[], { detached: true, stdio: 'ignore' });
    child.once('error', () => resolve(false));
    child.once('spawn', () => {
      child.unref();
      resolve(true);
    });
  });
}

export function uiCommand(getHome: () => string): Command {
  return withCommonOptions(
    new Command('ui')
      .description('serve the dashboard and HTTP API on 127.0.0.1 (if the daemon does not yet) and print the URL to open')
      .option('--open', 'also open the URL in the default browser')
      .option('--port <port>', 'port to serve on if the daemon does not serve HTTP yet (default: config http.port, else 7878; 0: any free port)')
      .addHelpText(
        'after',
        [
          '',
          'The URL carries the token of COMBINE_HOME/http.token once: the page trades it for a cookie.',
          'API clients send it as a header: curl -H "Authorization: Bearer $(cat $COMBINE_HOME/http.token)" http://127.0.0.1:7878/threads',
          '',
          'Examples:',
          '  combine ui --open',
          '  combine ui --port 8080 --json',
        ].join('\n'),
      ),
  ).action(async (opts: CommonOptions & { open?: boolean; port?: string }) => {
    const home = getHome();
    const port = parsePort(opts.port, '--port', true);
    const address = await withDaemon(home, opts, ({ client }, signal) => client.daemon.serveHttp.mutate({ port }, { signal }));
    let token: string;
    try {
      token = readFileSync(homeFiles(home).httpToken, 'utf8').trim();
    } catch (err) {
      throw new CliError(`cannot read the HTTP token: ${(err as Error).message}`, EXIT.FAILED);
    }
    const url = `${address.url}?token=${encodeURIComponent(token)}`;
    const opened = opts.open ? await openBrowser(url) : false;
    const elsewhere = port !== null && port !== 0 && port !== address.port;
    print(opts, { url, port: address.port, opened }, () =>
      [
        url,
        ...(elsewhere ? [`(the daemon already serves HTTP on port ${address.port}; stop it to change the port)`] : []),
        ...(opts.open && !opened ? ['could not start a browser: open the URL above yourself'] : []),
      ].join('\n'),
    );
  });
}
