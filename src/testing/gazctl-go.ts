// Running the reference Go `gazctl` (built by scripts/install-peers.sh) as a subprocess.

import { spawn } from 'node:child_process';

import { peerBinary } from './peers.js';
import { scrubEnv } from './process.js';

export interface RunGoGazctlOptions {
  /** Written to stdin, which is then closed. stdin is empty when absent. */
  input?: string | Buffer;
  /** Sets `BROKER_ADDRESS` (e.g. `cluster.brokerAddress`). */
  brokerAddress?: string;
  /** Extra environment, applied last (may also set BROKER_ADDRESS etc.). */
  env?: Record<string, string>;
  /** Working directory (gazctl reads a `gazctl.ini` from it). */
  cwd?: string;
  /** Kill the process (SIGKILL, code null) after this long. Default 30 s. */
  timeoutMs?: number;
}

export interface GoGazctlResult {
  /** Exit code; null when killed by a signal (e.g. the timeout). */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
  timedOut: boolean;
}

/**
 * Run the Go gazctl with `args`. The child's environment is this process's minus any
 * BROKER_ / CONSUMER_ / LOG_ / ZONE variables (so a developer's settings can't change a test),
 * plus `BROKER_ADDRESS` from `opts.brokerAddress`, plus `opts.env`.
 */
export function runGoGazctl(args: string[], opts: RunGoGazctlOptions = {}): Promise<GoGazctlResult> {
  const bin = peerBinary('gazctl');
  const env: NodeJS.ProcessEnv = {
    ...scrubEnv(process.env, ['BROKER_', 'CONSUMER_', 'LOG_', 'ZONE']),
    ...(opts.brokerAddress ? { BROKER_ADDRESS: opts.brokerAddress } : {}),
    ...(opts.env ?? {}),
  };
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { cwd: opts.cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, opts.timeoutMs ?? 30_000);
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({
        code,
        signal,
        stdout: Buffer.concat(out),
        stderr: Buffer.concat(err).toString('utf8'),
        timedOut,
      });
    });
    child.stdin.on('error', () => {
      // EPIPE when gazctl exits before reading its input; the exit status tells the story.
    });
    child.stdin.end(opts.input ?? '');
  });
}

export interface RunGoGazctlShardsOptions extends RunGoGazctlOptions {
  /** Added as `--consumer.address=<it>` unless `args` already give one. */
  consumerAddress?: string;
}

/**
 * Run a Go gazctl `shards ...` command (`args` start with `shards`), adding
 * `--consumer.address` when `args` lack one. The timeout of {@link runGoGazctl} matters here:
 * Go gazctl's shard calls wait for the consumer to be ready, forever when it is not there.
 */
export function runGoGazctlShards(args: string[], opts: RunGoGazctlShardsOptions = {}): Promise<GoGazctlResult> {
  const { consumerAddress, ...rest } = opts;
  const hasAddress = args.some((a) => a === '--consumer.address' || a.startsWith('--consumer.address='));
  const full = consumerAddress && !hasAddress ? [...args, `--consumer.address=${consumerAddress}`] : args;
  return runGoGazctl(full, rest);
}
