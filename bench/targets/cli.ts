/**
 * Target 4: wall time of `combine threads --active --json` (bin/combine, the installed executable, against
 * a running daemon holding 20 active threads) over the floor of `node -e ''`, spawned alternately so
 * that both see the same machine load. One ratio per run, of the medians of its pairs.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { createSimulator } from '../../src/sim/simulator.js';
import { BenchDaemon, ROOT, projectFile } from '../lib/daemon.js';
import { median, row, type Row } from '../lib/stats.js';

const PAIRS_PER_RUN = 15;

function wallMs(args: string[], env: NodeJS.ProcessEnv): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, { env, encoding: 'utf8' });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}

export async function cliTargets(runs: number): Promise<Row[]> {
  const sim = await createSimulator({ faults: [{ kind: 'hang' }] });
  const d = BenchDaemon.inTempHome(sim.url, { engine: { max_in_flight: 1 } });
  const floor: number[] = [];
  const cli: number[] = [];
  const ratio: number[] = [];
  try {
    await d.start();
    await d.importProject(projectFile('c', 20));
    await d.client.generate.all.mutate({ project_id: 'c' });
    const args = [join(ROOT, 'bin', 'combine'), 'threads', '--active', '--json'];
    const out = spawnSync(process.execPath, args, { env: d.env, encoding: 'utf8' });
    if (JSON.parse(out.stdout).length !== 21) throw new Error(`expected 21 active threads: ${out.stdout.slice(0, 200)}`);
    for (let i = 0; i < 3; i++) wallMs(args, d.env); // warm the page cache
    for (let run = 0; run < runs; run++) {
      const f: number[] = [];
      const c: number[] = [];
      for (let i = 0; i < PAIRS_PER_RUN; i++) {
        f.push(wallMs(['-e', ''], d.env));
        c.push(wallMs(args, d.env));
      }
      floor.push(median(f));
      cli.push(median(c));
      ratio.push(median(c) / median(f));
    }
  } finally {
    await d.dispose();
    await sim.close();
  }
  return [
    row({ target: '4', figure: "`node -e ''` wall time", runs: floor, unit: 'ms', goal: '' }),
    row({ target: '4', figure: '`combine threads --active --json` wall time', runs: cli, unit: 'ms', goal: '' }),
    row({ target: '4', figure: 'CLI ÷ node floor (per run)', runs: ratio, unit: '×', goal: '≤ 1.6×', check: (m) => m <= 1.6 }),
  ];
}
