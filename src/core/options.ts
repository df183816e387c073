// What the daemons' option parsers share (`gazette serve`'s in broker/flags.ts, a consumer's in
// consumer/flags.ts): the usage error they throw, the value parsers with go-flags' messages, and
// the help line of one option.

import { parseGoDuration } from '../lib/protocol/duration.js';

/** A bad option or value: one line on stderr and exit 2. */
export class UsageError extends Error {}

export function parseInt10(name: string, v: string): number {
  if (!/^-?\d+$/.test(v.trim())) throw new UsageError(`invalid value ${JSON.stringify(v)} for --${name}: not an integer`);
  return Number(v.trim());
}

export function parseBool(name: string, v: string): boolean {
  const s = v.trim().toLowerCase();
  if (s === '' || s === 'true' || s === '1') return true;
  if (s === 'false' || s === '0') return false;
  throw new UsageError(`invalid value ${JSON.stringify(v)} for --${name}: not a boolean`);
}

/** A Go duration, in nanoseconds. */
export function parseDurationNs(name: string, v: string): bigint {
  try {
    return parseGoDuration(v.trim());
  } catch {
    throw new UsageError(`invalid value ${JSON.stringify(v)} for --${name}: not a duration (e.g. 20s)`);
  }
}

/** One option's line of `--help`, as go-flags prints it: flag, help, default, environment variable. */
export function optionHelpLine(o: { name: string; kind: string; def: string; help: string; env: string }, width: number): string {
  const flag = o.kind === 'bool' ? `--${o.name}` : `--${o.name}=`;
  const def = o.def && o.kind !== 'bool' ? ` (default: ${o.def})` : '';
  return `      ${flag.padEnd(width)} ${o.help}${def} [$${o.env}]`;
}
