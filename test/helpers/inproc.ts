// Running gazctl commands inside the test process: oclif loads the same configuration and
// commands as bin/run.js (the tsc output under dist/src/commands), then runs one command with
// argv. stdout, stderr and the exit code are captured, so tests of rendering, option
// precedence and exit codes take milliseconds instead of a Node start-up each.
//
// Like runGazctl (test/helpers/cli.ts), every run gets a scrubbed environment (no BROKER_*,
// LOG_*, GAZCTL_*), `opts.env` on top, HOME and the working directory in a private temp dir
// unless `opts.cwd` says otherwise, and stdin from `opts.input` (empty when absent). Runs are
// serialized: they share process-wide state (cwd, env, stdio).

import { Config } from '@oclif/core';
import { Readable, Writable } from 'node:stream';
import { REPO_ROOT, gazctlSandbox } from './cli.js';

export interface InProcessResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface InProcessOptions {
  env?: Record<string, string>;
  cwd?: string;
  input?: string | Buffer;
  /** Called with each chunk the command writes to stdout (e.g. to interrupt it after a listing). */
  onStdout?: (chunk: Buffer) => void;
}

let config: Promise<Config> | undefined;
let queue: Promise<unknown> = Promise.resolve();

const SCRUBBED = ['BROKER_', 'CONSUMER_', 'LOG_', 'GAZCTL_', 'ZONE', 'XDG_CONFIG_HOME'];

/** Runs `gazctl <args>` in this process. */
export function runInProcess(args: string[], opts: InProcessOptions = {}): Promise<InProcessResult> {
  const run = queue.then(() => runNow(args, opts));
  queue = run.catch(() => {});
  return run;
}

async function runNow(args: string[], opts: InProcessOptions): Promise<InProcessResult> {
  config ??= Config.load({ root: REPO_ROOT });
  const cfg = await config;
  // The command id is the leading words that are not flags (`journals list`).
  let n = 0;
  while (n < args.length && !args[n]!.startsWith('-') && cfg.findCommand(args.slice(0, n + 1).join(':')) === undefined) n++;
  const id = args.slice(0, n + 1).join(':');
  if (!cfg.findCommand(id)) throw new Error(`no command in ${JSON.stringify(args)}`);
  const argv = args.slice(n + 1);

  const savedEnv = { ...process.env };
  const savedCwd = process.cwd();
  const descs = (['stdin', 'stdout', 'stderr'] as const).map((k) => [k, Object.getOwnPropertyDescriptor(process, k)!] as const);
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  for (const k of Object.keys(process.env)) if (SCRUBBED.some((p) => k.startsWith(p))) delete process.env[k];
  process.env.HOME = gazctlSandbox();
  Object.assign(process.env, opts.env ?? {});
  process.chdir(opts.cwd ?? gazctlSandbox());
  // The streams are swapped rather than their write methods patched: the test runner keeps its
  // own reference to the real stdout (it reports through it), and must keep it.
  const sink = (chunks: Buffer[], onChunk?: (chunk: Buffer) => void) =>
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        chunks.push(Buffer.from(chunk));
        onChunk?.(chunks.at(-1)!);
        cb();
      },
    });
  const stdin = Readable.from(opts.input === undefined ? [] : [Buffer.from(opts.input)]);
  Object.defineProperty(process, 'stdin', { value: stdin, configurable: true, writable: true });
  Object.defineProperty(process, 'stdout', { value: sink(out, opts.onStdout), configurable: true, writable: true });
  Object.defineProperty(process, 'stderr', { value: sink(err), configurable: true, writable: true });
  process.exitCode = undefined;
  let code: number;
  try {
    await cfg.runCommand(id, argv);
    code = Number(process.exitCode ?? 0);
  } catch (e) {
    // Errors thrown past the command's own catch (none expected) count as failures.
    err.push(Buffer.from(`uncaught: ${(e as Error).message}\n`));
    code = 1;
  } finally {
    process.exitCode = undefined;
    for (const [k, d] of descs) Object.defineProperty(process, k, d);
    process.chdir(savedCwd);
    for (const k of Object.keys(process.env)) if (!(k in savedEnv)) delete process.env[k];
    Object.assign(process.env, savedEnv);
  }
  return { code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

/** A short description of a result, for assertion messages. */
export function describeInProcess(args: string[], r: InProcessResult): string {
  return `gazctl ${args.join(' ')} → code ${r.code}\n--- stderr ---\n${r.stderr}--- stdout ---\n${r.stdout.slice(0, 2000)}`;
}
