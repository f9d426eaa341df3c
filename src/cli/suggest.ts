/**
 * What to suggest for a command that does not exist: first by meaning (people type `status`, `ps` or
 * `kill` from habit), then by spelling. Only names of real commands are ever suggested.
 */
import type { Command } from 'commander';

/** Words from other tools' habits → the commands that do what they mean here. */
const BY_MEANING: Record<string, string[]> = {
  status: ['daemon status', 'health'],
  start: ['daemon start'],
  stop: ['daemon stop', 'cancel'],
  restart: ['daemon stop', 'daemon start'],
  up: ['daemon start'],
  down: ['daemon stop'],
  ps: ['threads --active'],
  ls: ['threads', 'project list'],
  list: ['threads', 'project list', 'schedule list'],
  get: ['thread'],
  show: ['thread', 'project show'],
  describe: ['thread'],
  inspect: ['thread'],
  watch: ['thread --follow'],
  follow: ['thread --follow'],
  tail: ['logs -f'],
  log: ['logs'],
  kill: ['cancel'],
  abort: ['cancel'],
  delete: ['cancel', 'schedule remove'],
  rm: ['cancel', 'schedule remove'],
  rerun: ['retry'],
  resume: ['retry', 'schedule resume'],
  verify: ['ledger verify'],
  audit: ['ledger', 'ledger verify'],
  history: ['ledger', 'threads'],
  export: ['ledger export'],
  import: ['project import', 'ledger import'],
  cost: ['usage'],
  costs: ['usage'],
  spend: ['usage'],
  billing: ['usage'],
  budget: ['usage'],
  check: ['doctor', 'health'],
  diagnose: ['doctor'],
  setup: ['doctor', 'project import'],
  init: ['project import', 'doctor'],
  settings: ['config show'],
  cron: ['schedule list'],
  schedules: ['schedule list'],
  jobs: ['threads'],
  runs: ['threads', 'schedule runs'],
  generate: ['generate-epic', 'generate-all'],
  version: ['--version'],
};

/** Every command path of the tree: "threads", "daemon status", … */
export function commandPaths(program: Command): string[] {
  const walk = (cmd: Command, prefix: string): string[] =>
    cmd.commands.flatMap((c) => {
      const path = `${prefix}${c.name()}`;
      return [path, ...walk(c, `${path} `)];
    });
  return walk(program, '');
}

/** Edit distance with adjacent transpositions (optimal string alignment). */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** Up to 4 commands for an unknown word: by meaning first, then the closest spellings. */
export function suggestCommands(word: string, program: Command): string[] {
  const paths = commandPaths(program);
  const exists = (s: string) => s.startsWith('-') || paths.includes(s.split(' --')[0]!.split(' -')[0]!);
  const byMeaning = (BY_MEANING[word.toLowerCase()] ?? []).filter(exists);
  const bySpelling = paths
    .map((p) => ({ p, d: Math.min(distance(word, p), distance(word, p.split(' ').pop()!)) }))
    .filter(({ p, d }) => d <= Math.max(1, Math.floor(word.length / 3)) && !byMeaning.includes(p))
    .sort((x, y) => x.d - y.d)
    .map(({ p }) => p);
  return [...new Set([...byMeaning, ...bySpelling])].slice(0, 4);
}
