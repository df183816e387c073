// runConsumer(app): the entry point of a consumer application, our counterpart of upstream's
// runconsumer.Main. Its commands are upstream's: `serve` (run the consumer until signalled) and
// `print-config` (the combined configuration of flags, gazette.ini and environment, in INI
// format). Usage errors are one line on stderr and exit 2.
//
//   import { runConsumer } from 'gazctl/consumer';
//   await runConsumer(myApp, { name: 'my-app' });

import { basename } from 'node:path';
import type { Application } from './app.js';
import { consumerSecurity, serveConsumer, type ServeOptions } from './daemon.js';
import { parseOptions, printConfig, toConfig, usage, UsageError } from './flags.js';
import { parseGoDuration } from '../../lib/protocol/duration.js';
import type { Security } from '../security.js';

/**
 * Not an upstream option: how often a primary stores its recorded hints, as a Go duration
 * (upstream hard-codes 5 minutes). Shorter intervals let a test or a cron of `shards prune-log`
 * see primary hints sooner, at the cost of one etcd write per shard per interval.
 */
export const HINTS_INTERVAL_ENV = 'GAZETTE_HINTS_INTERVAL';

export interface RunConsumerOptions {
  /**
   * The application's name: its default etcd prefix is `/gazette/consumers/<name>` (upstream
   * names it after the application's Go type) and its usage line names it. Default: the name
   * the process was started as.
   */
  name?: string;
  /** Arguments after the program name (default: process.argv.slice(2)). */
  argv?: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Where print-config and help go (default stdout). */
  out?: (text: string) => void;
  serve?: ServeOptions;
}

/** Runs the command and resolves to its exit code (the process is left running). */
export async function runConsumerCommand(app: Application, opts: RunConsumerOptions = {}): Promise<number> {
  const name = opts.name ?? basename(process.argv[1] ?? 'consumer').replace(/\.[cm]?js$/, '');
  const out = opts.out ?? ((t: string) => void process.stdout.write(t));
  const env = opts.env ?? process.env;
  let parsed;
  try {
    parsed = parseOptions(opts.argv ?? process.argv.slice(2), env, opts.cwd ?? process.cwd());
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`${name}: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  if (parsed.command === 'help') {
    out(usage(name));
    return 0;
  }
  if (parsed.command === 'print-config') {
    out(printConfig(parsed.values));
    return 0;
  }
  let config;
  let hintsIntervalMs: number | undefined;
  let security: Security;
  try {
    config = toConfig(parsed.values);
    security = consumerSecurity(config);
    const interval = env[HINTS_INTERVAL_ENV];
    if (interval) {
      let ns: bigint;
      try {
        ns = parseGoDuration(interval);
      } catch (e) {
        throw new UsageError(`${HINTS_INTERVAL_ENV}: ${(e as Error).message}`);
      }
      if (ns < 1_000_000_000n) throw new UsageError(`${HINTS_INTERVAL_ENV} must be at least 1s (got ${JSON.stringify(interval)})`);
      hintsIntervalMs = Number(ns / 1_000_000n);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`${name} serve: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const etcdPrefix = config.etcdPrefix || `/gazette/consumers/${name}`;
  const serveOpts = hintsIntervalMs !== undefined && opts.serve?.hintsIntervalMs === undefined ? { ...opts.serve, hintsIntervalMs } : opts.serve;
  return serveConsumer({ ...config, etcdPrefix }, app, { ...serveOpts, security });
}

/** Runs the command and exits the process with its code, as upstream's Main does. */
export async function runConsumer(app: Application, opts: RunConsumerOptions = {}): Promise<never> {
  let code: number;
  try {
    code = await runConsumerCommand(app, opts);
  } catch (e) {
    process.stderr.write(`${opts.name ?? 'consumer'}: ${(e as Error).message}\n`);
    code = 1;
  }
  process.exit(code);
}
