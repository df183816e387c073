// A small wrapper over child processes started by the test harness.
//
// * stdout and stderr of the child go straight to a log file (the child never blocks on a pipe
//   that the test process forgets to drain), and `tail()` reads the last lines back for errors.
// * `stop()` sends a signal (SIGTERM by default) and escalates to SIGKILL after a timeout.
// * Every live child is kept in a process-wide registry; when the test process exits or gets
//   SIGINT/SIGTERM, all registered children are SIGKILLed so nothing outlives a test run.
//   Cleanup callbacks (e.g. removing a cluster's temp dir) can be registered the same way.

import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

export interface ManagedSpawnOptions {
  /** Short human name used in errors, e.g. `etcd` or `broker-1`. */
  name: string;
  command: string;
  args: string[];
  /** File receiving the child's stdout and stderr (appended to). */
  logFile: string;
  /** Full environment of the child (defaults to this process's environment). */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /**
   * Keep the test process alive while the child runs (default false). Unreferenced children
   * don't hold node's event loop, so a test that forgets to stop its cluster still finishes
   * (and the exit hook then kills the children); `waitForExit()`/`stop()` reference the child
   * while they wait.
   */
  ref?: boolean;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const live = new Set<ManagedProcess>();
const exitCleanups = new Set<() => void>();
let handlersInstalled = false;

function killAllNow(): void {
  for (const p of live) p.killNow('SIGKILL');
  live.clear();
  for (const fn of exitCleanups) {
    try {
      fn();
    } catch {
      // best effort at exit
    }
  }
  exitCleanups.clear();
}

function onSignal(sig: NodeJS.Signals): void {
  killAllNow();
  // Restore default behaviour when nobody else handles this signal: re-raise it.
  process.removeListener(sig, onSignal);
  if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', killAllNow);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

/** Run `fn` synchronously if the test process exits before `unregister` is called. */
export function registerExitCleanup(fn: () => void): () => void {
  installHandlers();
  exitCleanups.add(fn);
  return () => {
    exitCleanups.delete(fn);
  };
}

/** Pids of children started through this module that are still running. */
export function liveChildPids(): number[] {
  return [...live].map((p) => p.pid);
}

/** True when a process with this pid exists (signal 0 probe). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Last `maxLines` lines of a file (reads at most the final 64 KiB). */
export function tailFile(path: string, maxLines = 40): string {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const size = fstatSync(fd).size;
    const len = Math.min(size, 64 * 1024);
    const buf = Buffer.alloc(len);
    readSync(fd, buf, 0, len, size - len);
    const lines = buf.toString('utf8').split('\n');
    if (lines.at(-1) === '') lines.pop();
    return lines.slice(-maxLines).join('\n');
  } catch {
    return '';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

export class ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  readonly command: string;
  readonly args: readonly string[];
  private readonly child: ChildProcess;
  private exitInfo: ExitInfo | undefined;
  private readonly exitPromise: Promise<ExitInfo>;
  private keepRef = false;
  private waiters = 0;

  constructor(opts: ManagedSpawnOptions) {
    installHandlers();
    this.name = opts.name;
    this.logFile = opts.logFile;
    this.command = opts.command;
    this.args = [...opts.args];
    const fd = openSync(opts.logFile, 'a');
    try {
      this.child = spawn(opts.command, opts.args, {
        cwd: opts.cwd,
        env: opts.env ?? process.env,
        stdio: ['ignore', fd, fd],
      });
    } finally {
      closeSync(fd); // the child holds its own copy
    }
    let spawnError: Error | undefined;
    this.exitPromise = new Promise<ExitInfo>((resolve) => {
      this.child.once('error', (err) => {
        spawnError = err;
        this.exitInfo = { code: null, signal: null };
        live.delete(this);
        resolve(this.exitInfo);
      });
      this.child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        live.delete(this);
        resolve(this.exitInfo);
      });
    });
    this.spawnError = () => spawnError;
    if (this.child.pid === undefined) {
      // spawn failed (ENOENT etc.); `error` fires on the next tick and settles exitPromise.
      this.pid = -1;
      return;
    }
    this.pid = this.child.pid;
    this.keepRef = opts.ref ?? false;
    if (!this.keepRef) this.child.unref();
    live.add(this);
  }

  /** The error from `spawn` itself (e.g. ENOENT), if any. */
  readonly spawnError: () => Error | undefined;

  /** Exit status once the process has exited, else undefined. */
  get exited(): ExitInfo | undefined {
    return this.exitInfo;
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  /** Last lines of the process log. */
  tail(maxLines = 40): string {
    return tailFile(this.logFile, maxLines);
  }

  /** Describe the process and its recent log, for error messages. */
  describe(maxLines = 30): string {
    const st = this.exitInfo
      ? `exited (code ${this.exitInfo.code}, signal ${this.exitInfo.signal})`
      : `running (pid ${this.pid})`;
    const err = this.spawnError();
    return (
      `${this.name}: ${st}${err ? `, spawn error: ${err.message}` : ''}; log ${this.logFile}` +
      `\n--- last lines of ${this.name} log ---\n${this.tail(maxLines)}\n---`
    );
  }

  /** Resolves when the process exits; rejects after `timeoutMs` if given. */
  waitForExit(timeoutMs?: number): Promise<ExitInfo> {
    if (this.exitInfo) return Promise.resolve(this.exitInfo);
    // Hold the event loop open while someone waits for the exit event.
    if (this.waiters++ === 0) this.child.ref();
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      if (--this.waiters === 0 && !this.keepRef && !this.exitInfo) this.child.unref();
    };
    return new Promise((resolve, reject) => {
      const t =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              release();
              reject(new Error(`${this.name} (pid ${this.pid}) did not exit within ${timeoutMs} ms`));
            }, timeoutMs);
      void this.exitPromise.then((info) => {
        if (t !== undefined) clearTimeout(t);
        release();
        resolve(info);
      });
    });
  }

  /** Send a signal right away, ignoring errors (process already gone). */
  killNow(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.exitInfo || this.pid < 0) return;
    try {
      this.child.kill(signal);
    } catch {
      // already gone
    }
  }

  /**
   * Stop the process: send `signal`, wait up to `timeoutMs`, then SIGKILL and wait for exit.
   * Idempotent; resolves with the exit status.
   */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 5000): Promise<ExitInfo> {
    if (this.exitInfo) return this.exitInfo;
    this.killNow(signal);
    if (signal !== 'SIGKILL') {
      try {
        return await this.waitForExit(timeoutMs);
      } catch {
        this.killNow('SIGKILL');
      }
    }
    return this.waitForExit();
  }
}

/** Spawn a managed child process (see {@link ManagedProcess}). */
export function spawnManaged(opts: ManagedSpawnOptions): ManagedProcess {
  return new ManagedProcess(opts);
}

/**
 * Copy of `env` without variables whose names start with one of `prefixes` — used so that a
 * developer's BROKER_* / ETCD_* / LOG_* settings do not leak into test peers.
 */
export function scrubEnv(env: NodeJS.ProcessEnv, prefixes: string[]): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) {
    if (prefixes.some((p) => k.startsWith(p))) continue;
    out[k] = v;
  }
  return out;
}

/** Sleep helper. */
export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Thrown from a {@link pollUntil} check to stop polling at once (e.g. the process died). */
export class PollAbort extends Error {
  override name = 'PollAbort';
}

/**
 * Poll `check` until it returns a value other than `undefined`/`false`, or until `timeoutMs`.
 * `check` may throw; the last error (or `describe()`) is included in the timeout error. A
 * {@link PollAbort} thrown by `check` ends polling at once, with `describe()` appended.
 */
export async function pollUntil<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  opts: { timeoutMs: number; intervalMs?: number; describe?: () => string },
): Promise<T> {
  const deadline = Date.now() + opts.timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
      lastErr = undefined;
    } catch (e) {
      if (e instanceof PollAbort) {
        throw new Error(`while waiting for ${what}: ${e.message}${opts.describe ? `\n${opts.describe()}` : ''}`);
      }
      lastErr = e;
    }
    if (Date.now() >= deadline) {
      const why = lastErr instanceof Error ? lastErr.message : lastErr !== undefined ? String(lastErr) : '';
      const extra = opts.describe ? `\n${opts.describe()}` : '';
      throw new Error(`timed out after ${opts.timeoutMs} ms waiting for ${what}${why ? `: ${why}` : ''}${extra}`);
    }
    await delay(opts.intervalMs ?? 100);
  }
}
