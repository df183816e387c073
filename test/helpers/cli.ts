// Running our gazctl (`node <repo>/bin/run.js`) as a subprocess, the way an operator or a cron
// job does, for end-to-end tests.
//
// Every run gets a clean environment: this process's environment minus BROKER_* / LOG_* /
// GAZCTL_* / XDG_CONFIG_HOME (so a developer's settings can't change a test), then `opts.env`. The working
// directory and HOME are a private temp dir, so no gazctl.ini (./gazctl.ini or
// ~/.config/gazette/gazctl.ini) is picked up.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repository root: the nearest ancestor of this (compiled) file holding `bin/run.js`. */
export const REPO_ROOT: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'bin', 'run.js')) && existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`cannot find the repository root (bin/run.js) above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
})();

export const GAZCTL_BIN = join(REPO_ROOT, 'bin', 'run.js');

/** The launcher package managers install as `gazctl` (it runs bin/run.js). */
export const GAZCTL_LAUNCHER = join(REPO_ROOT, 'bin', 'gazctl');

let sandbox: string | undefined;

/** A private temp dir (cwd and HOME of every gazctl run), removed when this process exits. */
export function gazctlSandbox(): string {
  if (!sandbox) {
    const dir = mkdtempSync(join(tmpdir(), 'gazctl-cli-'));
    sandbox = dir;
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return sandbox;
}

const SCRUBBED = ['BROKER_', 'LOG_', 'GAZCTL_', 'XDG_CONFIG_HOME'];

/** The environment a gazctl run gets (see the file comment). */
export function gazctlEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (SCRUBBED.some((p) => k.startsWith(p))) continue;
    env[k] = v;
  }
  env.HOME = gazctlSandbox();
  return { ...env, ...extra };
}

export interface RunGazctlOptions {
  /** Extra environment applied last (e.g. `{ BROKER_ADDRESS: cluster.brokerAddress }`). */
  env?: Record<string, string>;
  /** Written to stdin, which is then closed. stdin is empty when absent. */
  input?: string | Buffer;
  /** SIGKILL the process after this long (the result then has `timedOut` and code null). Default 60 s. */
  timeoutMs?: number;
  /** Working directory (default: the sandbox). */
  cwd?: string;
  /** Variables removed from the environment (after `env`). */
  unsetEnv?: string[];
  /** Run the installed launcher, bin/gazctl (a shell script), instead of `node bin/run.js`. */
  launcher?: boolean;
  /** spawnGazctl only: leave stdin open for the caller to write to and end (`input` is ignored). */
  keepStdinOpen?: boolean;
  /** Command prefix to run gazctl under (e.g. `nsenter --net=<ns> --`: in a network namespace). */
  wrap?: string[];
}

export interface GazctlResult {
  /** Exit code; null when killed by a signal. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
  timedOut: boolean;
}

export interface GazctlProcess {
  readonly child: ChildProcess;
  /** Bytes written to stdout so far. */
  stdoutBytes(): number;
  /** stdout so far, as UTF-8 text. */
  stdoutText(): string;
  /** stderr so far. */
  stderrText(): string;
  /** Resolves when the process has exited and its pipes are closed. */
  readonly result: Promise<GazctlResult>;
}

/**
 * Start `node bin/run.js ...args` (or bin/gazctl with `launcher`) and return at once; see {@link runGazctl} for the environment.
 * The process is killed with SIGKILL after `timeoutMs` and when this process exits.
 */
export function spawnGazctl(args: string[], opts: RunGazctlOptions = {}): GazctlProcess {
  const env = gazctlEnv(opts.env);
  for (const k of opts.unsetEnv ?? []) delete env[k];
  const [bare, bareArgv] = opts.launcher ? [GAZCTL_LAUNCHER, args] : [process.execPath, [GAZCTL_BIN, ...args]];
  const [command, argv] = opts.wrap && opts.wrap.length > 0 ? [opts.wrap[0]!, [...opts.wrap.slice(1), bare, ...bareArgv]] : [bare, bareArgv];
  const child = spawn(command, argv, {
    cwd: opts.cwd ?? gazctlSandbox(),
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let outBytes = 0;
  let timedOut = false;
  const killAtExit = () => child.kill('SIGKILL');
  process.once('exit', killAtExit);
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, opts.timeoutMs ?? 60_000);
  child.stdout!.on('data', (b: Buffer) => {
    out.push(b);
    outBytes += b.length;
  });
  child.stderr!.on('data', (b: Buffer) => err.push(b));
  const result = new Promise<GazctlResult>((resolve, reject) => {
    child.once('error', (e) => {
      clearTimeout(timer);
      process.off('exit', killAtExit);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      process.off('exit', killAtExit);
      resolve({ code, signal, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString('utf8'), timedOut });
    });
  });
  child.stdin!.on('error', () => {
    // EPIPE when gazctl exits before reading its input; the exit status tells the story.
  });
  if (!opts.keepStdinOpen) child.stdin!.end(opts.input ?? '');
  return {
    child,
    stdoutBytes: () => outBytes,
    stdoutText: () => Buffer.concat(out).toString('utf8'),
    stderrText: () => Buffer.concat(err).toString('utf8'),
    result,
  };
}

/** Run our gazctl to completion: `{code, stdout (Buffer), stderr (string)}` plus signal/timedOut. */
export function runGazctl(args: string[], opts: RunGazctlOptions = {}): Promise<GazctlResult> {
  return spawnGazctl(args, opts).result;
}

/** A short description of a result, for assertion messages. */
export function describeResult(args: string[], r: GazctlResult): string {
  const out = r.stdout.length > 2000 ? `${r.stdout.subarray(0, 2000).toString('utf8')}… (${r.stdout.length} bytes)` : r.stdout.toString('utf8');
  return `gazctl ${args.join(' ')} → code ${r.code}${r.signal ? ` signal ${r.signal}` : ''}${r.timedOut ? ' (timed out)' : ''}\n--- stderr ---\n${r.stderr}--- stdout ---\n${out}`;
}

/**
 * Runs our gazctl on a pseudo-terminal (util-linux `script`), as an operator at a shell would,
 * and types `answer` (plus Enter) once `prompt` shows on the terminal. Resolves with everything
 * the terminal showed (stdout and stderr together) and the exit code.
 */
export function runGazctlOnTerminal(
  args: string[],
  opts: { env?: Record<string, string>; prompt: RegExp; answer: string; timeoutMs?: number },
): Promise<{ code: number | null; screen: string; answered: boolean }> {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const command = [process.execPath, GAZCTL_BIN, ...args].map(quote).join(' ');
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    cwd: gazctlSandbox(),
    env: { ...gazctlEnv(opts.env), TERM: 'dumb', NO_COLOR: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let screen = '';
  let answered = false;
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
  const onData = (b: Buffer) => {
    screen += b.toString('utf8');
    if (!answered && opts.prompt.test(screen)) {
      answered = true;
      child.stdin!.write(`${opts.answer}\r`);
    }
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  child.stdin!.on('error', () => {});
  return new Promise((resolve, reject) => {
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      child.stdin!.destroy();
      resolve({ code, screen, answered });
    });
  });
}
