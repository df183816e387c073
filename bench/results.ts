// One results file per benchmark that `npm run bench` ran: bench/results/<name>.md.
//
// Design pages say why the code is the way it is; the figures behind it change with every run and
// every machine, so they live here, rewritten by each run of the benchmark they belong to. What a
// run prints while a benchmark runs (its per-run lines and its own summary) and the rows of the
// final summary that belong to it are recorded as printed, under the date, the machine and the
// commit. A file may keep older results below EARLIER (a dated log moved out of the docs, or runs
// worth keeping): that part is carried over as it is when the file is rewritten.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The line above which a results file is rewritten, and below which it is kept. */
export const EARLIER = '<!-- Earlier results, kept as they are when bench/run.ts rewrites this file. -->';

export class BenchResults {
  private readonly lines = new Map<string, string[]>();
  private current: string[] = [];
  private readonly log = console.log.bind(console);

  constructor() {
    // Everything printed goes to the terminal as before, and to the benchmarks being attributed.
    console.log = (...args: unknown[]) => {
      this.log(...args);
      if (this.current.length === 0) return;
      const text = args.map((a) => (typeof a === 'string' ? a : String(a))).join(' ');
      for (const name of this.current) this.linesOf(name).push(text);
    };
  }

  private linesOf(name: string): string[] {
    let l = this.lines.get(name);
    if (!l) this.lines.set(name, (l = []));
    return l;
  }

  /** Attributes what is printed from now on to `names` (none: to no benchmark). */
  section(...names: string[]): void {
    this.current = names;
  }

  /** Runs `f` with what it prints attributed to `name`. */
  async during<T>(name: string, f: () => Promise<T>): Promise<T> {
    const before = this.current;
    this.current = [name];
    try {
      return await f();
    } finally {
      this.current = before;
    }
  }

  /** The benchmarks that printed something. */
  names(): string[] {
    return [...this.lines.keys()];
  }

  /**
   * Writes `dir`/<name>.md for each benchmark that printed something: the header, what it printed
   * in a code block, then the file's earlier results (below EARLIER) as they were. Returns the
   * paths written.
   */
  write(dir: string, o: { machine: string; repo: string; failures: string[]; command: string }): string[] {
    mkdirSync(dir, { recursive: true });
    const commit = gitDescribe(o.repo);
    const when = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const written: string[] = [];
    for (const [name, lines] of this.lines) {
      const path = join(dir, `${name}.md`);
      const earlier = existsSync(path) ? readFileSync(path, 'utf8').split(EARLIER)[1] : undefined;
      const body = trimBlank(lines).join('\n');
      const text = [
        `# Benchmark \`${name}\`: latest results`,
        '',
        `Written by \`${o.command}\` (bench/run.ts; see its header for what is measured and the`,
        'environment variables). Rewritten by each run of this benchmark; older results, where kept,',
        'follow the last section.',
        '',
        `- date: ${when}`,
        `- commit: ${commit}`,
        `- ${o.machine}`,
        ...(o.failures.length ? [`- failures in this run: ${o.failures.length} (see below)`] : []),
        '',
        '```',
        body,
        ...(o.failures.length ? ['', ...o.failures.map((f) => `!! ${f}`)] : []),
        '```',
        '',
        EARLIER,
        earlier !== undefined ? earlier.replace(/^\n+/, '\n') : '\n',
      ].join('\n');
      writeFileSync(path, text.endsWith('\n') ? text : text + '\n');
      written.push(path);
    }
    return written;
  }
}

function trimBlank(lines: string[]): string[] {
  const out = lines.flatMap((l) => l.split('\n'));
  while (out.length && out[0]!.trim() === '') out.shift();
  while (out.length && out.at(-1)!.trim() === '') out.pop();
  return out;
}

/** The commit the benchmark ran on, marked dirty when the tree had changes. */
function gitDescribe(repo: string): string {
  try {
    const head = execFileSync('git', ['-C', repo, 'log', '-1', '--format=%h %s'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['-C', repo, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() !== '';
    return dirty ? `${head} (with uncommitted changes)` : head;
  } catch {
    return 'unknown (not a git checkout)';
  }
}
