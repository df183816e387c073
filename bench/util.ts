// Helpers for the benchmarks in bench/run.ts: timed child processes (wall clock, CPU and peak
// RSS through GNU time when available), the input generator, statistics and table rendering.
// Nothing here asserts on timings: the benchmarks print figures and ratios.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

import { registerExitCleanup } from '../src/testing/index.js';

// ---- child processes ------------------------------------------------------------------------

const live = new Set<ChildProcess>();
let cleanupRegistered = false;

/** Kill our own benchmark children (not the cluster: the harness owns those) if we exit early. */
function trackChild(child: ChildProcess): void {
  if (!cleanupRegistered) {
    cleanupRegistered = true;
    registerExitCleanup(() => {
      for (const c of live) {
        try {
          c.kill('SIGKILL');
        } catch {
          /* already gone */
        }
      }
    });
  }
  live.add(child);
  child.once('exit', () => live.delete(child));
}

/** GNU time, when installed: gives user/sys CPU seconds and peak RSS of a child. */
const GNU_TIME = '/usr/bin/time';
let gnuTimeOk: boolean | undefined;
export function haveGnuTime(): boolean {
  if (gnuTimeOk === undefined) {
    gnuTimeOk =
      existsSync(GNU_TIME) && spawnSync(GNU_TIME, ['-f', '%e', '-o', '/dev/null', 'true'], { stdio: 'ignore' }).status === 0;
  }
  return gnuTimeOk;
}

export interface CpuUsage {
  /** CPU seconds in user mode. */
  user: number;
  /** CPU seconds in kernel mode. */
  sys: number;
  /** Peak resident set, KiB. */
  maxRssKiB: number;
}

export interface RunResult {
  wallMs: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  timedOut: boolean;
  cpu?: CpuUsage;
  /** Bytes and sha256 of stdout, with `stdout: 'hash'`. */
  out?: { bytes: number; sha256: string };
}

export interface RunOptions {
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** 'devnull': stdout goes straight to /dev/null (no pipe); 'hash': counted and hashed here. */
  stdout: 'devnull' | 'hash' | 'ignore';
  timeoutMs: number;
  /** Measure CPU and RSS with GNU time (written to this file). */
  statsFile?: string;
  /** The child's stdin comes from this file (default: no stdin). */
  stdinFile?: string;
}

/** Runs `cmd args` to completion, timing it from spawn to exit. */
export function runTimed(cmd: string, args: string[], o: RunOptions): Promise<RunResult> {
  const useTime = o.statsFile !== undefined && haveGnuTime();
  const argv = useTime ? ['-f', '%U %S %M', '-o', o.statsFile!, cmd, ...args] : args;
  const bin = useTime ? GNU_TIME : cmd;
  const devnull = o.stdout === 'devnull' ? openSync('/dev/null', 'w') : undefined;
  const stdin = o.stdinFile !== undefined ? openSync(o.stdinFile, 'r') : undefined;
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(bin, argv, {
      cwd: o.cwd,
      env: o.env,
      stdio: [stdin ?? 'ignore', devnull ?? (o.stdout === 'hash' ? 'pipe' : 'ignore'), 'pipe'],
    });
    trackChild(child);
    if (devnull !== undefined) closeSync(devnull);
    if (stdin !== undefined) closeSync(stdin);
    const hash = o.stdout === 'hash' ? createHash('sha256') : undefined;
    let bytes = 0;
    child.stdout?.on('data', (b: Buffer) => {
      bytes += b.length;
      hash!.update(b);
    });
    const err: Buffer[] = [];
    let errBytes = 0;
    child.stderr!.on('data', (b: Buffer) => {
      if (errBytes < 64 * 1024) err.push(b);
      errBytes += b.length;
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, o.timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      const wallMs = performance.now() - t0;
      clearTimeout(timer);
      let cpu: CpuUsage | undefined;
      if (useTime) {
        try {
          // GNU time prefixes "Command exited with non-zero status N" on failures: take the last line.
          const lines = readFileSync(o.statsFile!, 'utf8').trim().split('\n');
          const [u, s, m] = lines[lines.length - 1]!.trim().split(/\s+/).map(Number);
          if ([u, s, m].every((x) => Number.isFinite(x))) cpu = { user: u!, sys: s!, maxRssKiB: m! };
        } catch {
          /* no figures */
        }
        rmSync(o.statsFile!, { force: true });
      }
      resolve({
        wallMs,
        code,
        signal,
        stderr: Buffer.concat(err).toString('utf8'),
        timedOut,
        cpu,
        out: hash ? { bytes, sha256: hash.digest('hex') } : undefined,
      });
    });
  });
}

/** Spawn-to-exit wall time of a short command with all output discarded. */
export function timeSpawn(cmd: string, args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ ms: number; code: number | null }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd, args, { cwd, env, stdio: 'ignore' });
    trackChild(child);
    child.once('error', reject);
    child.once('exit', (code) => resolve({ ms: performance.now() - t0, code }));
  });
}

/** CPU seconds (user + sys) a live process has used so far, from /proc; undefined elsewhere. */
export function procCpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / clockTicks();
  } catch {
    return undefined;
  }
}

/**
 * Lets the machine settle before a timed run: writes dirty pages back (`sync`, so the previous
 * run's writes are not flushed on this run's time) and waits until the broker's CPU use falls
 * below 5% over 250 ms (it may still be persisting the previous run's fragments), at most
 * `maxMs`. Returns how long it waited.
 */
export async function settle(brokerPid: number | undefined, maxMs = 15_000): Promise<number> {
  const t0 = performance.now();
  spawnSync('sync');
  for (;;) {
    const c0 = procCpuSeconds(brokerPid);
    await new Promise((r) => setTimeout(r, 250));
    const c1 = procCpuSeconds(brokerPid);
    if (c0 === undefined || c1 === undefined || c1 - c0 < 0.0125) break;
    if (performance.now() - t0 > maxMs) break;
  }
  return performance.now() - t0;
}

let ticks: number | undefined;
function clockTicks(): number {
  if (ticks === undefined) {
    const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    ticks = Number(r.stdout?.trim()) || 100;
  }
  return ticks;
}

// ---- input ------------------------------------------------------------------------------------

/**
 * Writes `bytes` of newline-terminated lines to `path` (lines of 60..140 bytes, ~100 on
 * average; `bytes` must be a multiple of 1 MiB). Every 1 MiB block carries its block number in
 * each line, so no two blocks are equal. Returns the sha256 of the file and the line count.
 */
export function writeLinesFile(path: string, bytes: number, avgLine = 100): { sha256: string; lines: number } {
  const BLOCK = 1 << 20;
  if (bytes % BLOCK !== 0 || bytes <= 0) throw new RangeError(`input size must be a positive multiple of 1 MiB, got ${bytes}`);
  const spread = Math.max(0, Math.min(avgLine - 20, 40));
  const template = Buffer.alloc(BLOCK);
  const stamps: number[] = []; // where each line's 8-digit block number goes
  const filler = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_';
  let pos = 0;
  let line = 0;
  let seed = 0x9e3779b9;
  const rand = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 0x100000000;
  };
  while (pos < BLOCK) {
    let len = avgLine - spread + Math.floor(rand() * (2 * spread + 1));
    const left = BLOCK - pos;
    // Never leave a tail too short for a line: the last line takes what is left.
    if (left - len < avgLine - spread) len = left;
    const head = `00000000:${String(line).padStart(6, '0')} `;
    if (len < head.length + 1) len = left;
    template.write(head, pos, 'latin1');
    stamps.push(pos);
    for (let i = head.length; i < len - 1; i++) template[pos + i] = filler.charCodeAt((line * 7 + i) % filler.length);
    template[pos + len - 1] = 10;
    pos += len;
    line++;
  }
  const fd = openSync(path, 'w');
  const hash = createHash('sha256');
  try {
    const block = Buffer.from(template);
    for (let b = 0; b < bytes / BLOCK; b++) {
      const digits = String(b).padStart(8, '0');
      const d = Buffer.from(digits, 'latin1');
      for (const s of stamps) d.copy(block, s);
      hash.update(block);
      let off = 0;
      while (off < block.length) off += writeSync(fd, block, off);
    }
  } finally {
    closeSync(fd);
  }
  return { sha256: hash.digest('hex'), lines: line * (bytes / BLOCK) };
}

// ---- statistics and formatting ------------------------------------------------------------------

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return NaN;
  return n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}

/** Nearest-rank percentile. */
export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

export function fmt(x: number | undefined, digits = 1): string {
  return x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(digits);
}

/** Renders rows as a left-aligned text table (first row is the header). */
export function table(rows: string[][], rightAlignFrom = 1): string {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows
    .map((r, ri) =>
      r
        .map((c, i) => (i >= rightAlignFrom && ri > 0 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
