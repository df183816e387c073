// Typed option descriptors. Each command option is declared once, as an OptionSpec: its long
// name, short name, environment variable, where gazctl.ini may hold it, and the parser (with
// its bounds) that turns text into the typed value. From the same descriptors come the oclif
// flags (which only tokenize argv and render help) and the resolution of every value, so a
// value from the command line, from gazctl.ini or from the environment is checked by the same
// parser and refused the same way: a usage error (exit 2) that names the option and, for
// gazctl.ini and the environment, where the value came from.
//
// Precedence is upstream's (go-flags): command line > gazctl.ini > environment > default, with a
// context (src/cli/contexts.ts), when one is in effect, between the command line and gazctl.ini.
import { Flags, type Interfaces } from '@oclif/core';
import type { LabelSelector } from '../lib/protocol/gen/broker/protocol.js';
import { parseLabelSelector } from '../lib/protocol/selector.js';
import { parseEndpoint } from '../lib/protocol/route.js';
import { parseGoDuration } from '../lib/protocol/duration.js';
import { ValidationError } from '../lib/protocol/errors.js';
import { iniLookup, type IniFile } from '../lib/config/ini.js';
import { UsageError } from './exit.js';
import { parseSocksServer, type SocksServer } from '../lib/socks.js';

type Letter =
  | 'a' | 'b' | 'c' | 'd' | 'e' | 'f' | 'g' | 'h' | 'i' | 'j' | 'k' | 'l' | 'm'
  | 'n' | 'o' | 'p' | 'q' | 'r' | 's' | 't' | 'u' | 'v' | 'w' | 'x' | 'y' | 'z'
  | 'L';

/** Where gazctl.ini may hold an option. */
export interface IniPlace {
  /** The Go struct field name upstream uses as the key (e.g. `MaxTxnSize`, `Address`). */
  field: string;
  /**
   * Group options only: the option group's sub-section (`Broker`, `Logging`, `Consumer`), or
   * '' for options in the group section itself (`Zone`).
   */
  section?: string;
}

export interface OptionSpec<T> {
  /** Long flag name, without dashes. */
  readonly name: string;
  readonly char?: Letter;
  readonly description: string;
  readonly helpGroup?: string;
  /** Environment variable (group options only; upstream's sub-command options have none). */
  readonly env?: string;
  /**
   * Where an environment of several variables sets the option (checked after `env`): the text
   * they make together and how to name them, or undefined when they do not set it. Throws
   * OptionValueError when they are set only in part.
   */
  readonly envFrom?: (env: NodeJS.ProcessEnv) => { text: string; variable: string } | undefined;
  /** gazctl.ini key, or null where upstream marks the option no-ini. */
  readonly ini: IniPlace | null;
  /** How argv spells it: a switch, one value, a value among `choices`, or a repeatable value. */
  readonly kind: 'boolean' | 'value' | 'choice' | 'multiple';
  readonly choices?: readonly string[];
  /** Default shown in --help (help only; `fallback` is what applies). */
  readonly helpDefault?: string;
  /** The value when no source sets the option, or the message when it is required. */
  readonly fallback: { value: T } | { missing: string };
  /** Text → value. Throws OptionValueError (or ValidationError) with the reason. */
  parse(text: string): T;
  /** A service endpoint: print-config says where its value came from even when it is the default. */
  readonly endpoint?: boolean;
}

/** A bad option value; the resolver adds the option's name and where the text came from. */
export class OptionValueError extends Error {}

export type OptionSet = Record<string, OptionSpec<unknown>>;
export type OptionValues<S extends OptionSet> = { [K in keyof S]: S[K] extends OptionSpec<infer T> ? T : never };

// ---- parsers --------------------------------------------------------------------------------

const q = (s: string) => JSON.stringify(s);

function intParser(bounds: { min?: number }): (text: string) => number {
  return (text) => {
    const t = text.trim();
    if (!/^-?\d+$/.test(t) || !Number.isSafeInteger(Number(t))) throw new OptionValueError(`expected an integer, got ${q(text)}`);
    const n = Number(t);
    if (bounds.min !== undefined && n < bounds.min) throw new OptionValueError(`expected an integer >= ${bounds.min}, got ${n}`);
    return n;
  };
}

/** Go duration (30s, 5m, 1h30m) → nanoseconds, never negative. */
export function parseDurationText(text: string): bigint {
  let ns: bigint;
  try {
    ns = parseGoDuration(text);
  } catch {
    ns = -1n;
  }
  if (ns < 0n) throw new OptionValueError(`invalid duration ${q(text)} (use Go syntax such as 30s, 5m, 1h30m)`);
  return ns;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * A point in time → unix seconds (0 = unset, as upstream's time flags). Three spellings:
 *   * unix seconds, a non-negative integer (upstream's only form: `1700000000`);
 *   * an RFC 3339 time with its zone (`2024-05-01T00:00:00Z`, `2024-05-01 02:00:00+02:00`),
 *     a fraction of a second rounded down;
 *   * a Go duration ago (`24h`, `90m`, `1h30m`): that long before `now` (milliseconds since the
 *     epoch, default the current time), rounded down to the second.
 */
export function parseTimeText(text: string, now: number = Date.now()): number {
  const t = text.trim();
  if (/^-\d+$/.test(t)) throw new OptionValueError(`expected unix seconds >= 0, got ${t}`);
  if (/^\d+$/.test(t)) {
    const n = Number(t);
    if (!Number.isSafeInteger(n)) throw new OptionValueError(`unix seconds out of range: ${q(text)}`);
    return n;
  }
  const m = RFC3339.exec(t);
  if (m) {
    const ms = Date.parse(t.replace(' ', 'T'));
    const [mo, d, h, mi, s] = [m[2], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number];
    if (Number.isNaN(ms) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) {
      throw new OptionValueError(`invalid RFC 3339 time ${q(text)}`);
    }
    if (ms < 0) throw new OptionValueError(`time ${q(text)} is before 1970`);
    return Math.floor(ms / 1000);
  }
  let ns: bigint | undefined;
  try {
    ns = parseGoDuration(t);
  } catch {
    ns = undefined;
  }
  if (ns !== undefined) {
    if (ns < 0n) throw new OptionValueError(`a duration ago must not be negative, got ${q(text)}`);
    const at = Math.floor((now - Number(ns / 1_000_000n)) / 1000);
    if (at < 0) throw new OptionValueError(`${q(text)} ago is before 1970`);
    return at;
  }
  throw new OptionValueError(`expected unix seconds, an RFC 3339 time or a duration ago such as 24h, got ${q(text)}`);
}

function boolParser(text: string): boolean {
  // gazctl.ini spells both values; as upstream, a switch with an empty value (`DryRun =`) is set.
  if (text === 'true' || text === '') return true;
  if (text === 'false') return false;
  throw new OptionValueError(`expected true or false, got ${q(text)}`);
}

function choiceParser<C extends string>(choices: readonly C[]): (text: string) => C {
  return (text) => {
    if (!(choices as readonly string[]).includes(text)) throw new OptionValueError(`expected one of ${choices.join(', ')}, got ${q(text)}`);
    return text as C;
  };
}

function endpointParser(text: string): string {
  parseEndpoint(text); // throws ValidationError naming the endpoint and what is wrong
  return text;
}

// ---- constructors -----------------------------------------------------------------------------

interface Common {
  char?: Letter;
  description: string;
  helpGroup?: string;
  env?: string;
  ini: IniPlace | null;
}

export function stringOption(o: Common & { default: string; showDefault?: boolean }): OptionSpec<string> {
  return { ...o, name: '', kind: 'value', helpDefault: o.showDefault ? o.default : undefined, fallback: { value: o.default }, parse: (t) => t };
}

/** A string option that is undefined (or '') when unset. */
export function optionalStringOption(o: Common): OptionSpec<string | undefined> {
  return { ...o, name: '', kind: 'value', fallback: { value: undefined }, parse: (t) => t };
}

export function intOption(o: Common & { default: number; min?: number; showDefault?: boolean }): OptionSpec<number> {
  return { ...o, name: '', kind: 'value', helpDefault: o.showDefault ? String(o.default) : undefined, fallback: { value: o.default }, parse: intParser({ min: o.min }) };
}

/** A time flag (`--from`, `--to`): see {@link parseTimeText}; unix seconds, 0 when unset. */
export function timeOption(o: Common): OptionSpec<number> {
  return { ...o, name: '', kind: 'value', fallback: { value: 0 }, parse: (t) => parseTimeText(t) };
}

export function durationOption(o: Common & { default: string; showDefault?: boolean }): OptionSpec<bigint> {
  return { ...o, name: '', kind: 'value', helpDefault: o.showDefault ? o.default : undefined, fallback: { value: parseDurationText(o.default) }, parse: parseDurationText };
}

export function booleanOption(o: Common): OptionSpec<boolean> {
  return { ...o, name: '', kind: 'boolean', fallback: { value: false }, parse: boolParser };
}

export function choiceOption<const C extends string>(o: Common & { choices: readonly C[]; default: NoInfer<C>; showDefault?: boolean }): OptionSpec<C> {
  return { ...o, name: '', kind: 'choice', helpDefault: o.showDefault ? o.default : undefined, fallback: { value: o.default }, parse: choiceParser(o.choices) };
}

export function listOption(o: Common): OptionSpec<string[]> {
  return { ...o, name: '', kind: 'multiple', fallback: { value: [] }, parse: (t) => [t] };
}

/** A byte size: a whole number of bytes, or with a binary unit (`512KiB`, `64MiB`, `1GiB`; K, M, G, T alone too). */
export function parseSizeText(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(?:([KMGT])(?:i?B)?|B)?$/i.exec(text.trim());
  const n = m ? Number(m[1]) * 1024 ** (m[2] ? 'KMGT'.indexOf(m[2].toUpperCase()) + 1 : 0) : NaN;
  if (!Number.isFinite(n) || !Number.isSafeInteger(Math.floor(n))) throw new OptionValueError(`expected a size such as 1048576, 512KiB, 64MiB or 1GiB, got ${q(text)}`);
  return Math.floor(n);
}

export function sizeOption(o: Common & { default: string; showDefault?: boolean }): OptionSpec<number> {
  return { ...o, name: '', kind: 'value', helpDefault: o.showDefault ? o.default : undefined, fallback: { value: parseSizeText(o.default) }, parse: parseSizeText };
}

/**
 * --socks-server host:port: the SOCKS5 proxy of every connection. Besides gazctl.ini and the
 * command line, a pod's environment sets it: Kubernetes gives every container of a namespace
 * with a Service `socks-server` the variables SOCKS_SERVER_SERVICE_HOST and
 * SOCKS_SERVER_SERVICE_PORT (both needed). '' means no proxy (to override the environment).
 */
export function socksServerOption(o: Omit<Common, 'env'>): OptionSpec<SocksServer | undefined> {
  return {
    ...o,
    name: '',
    kind: 'value',
    fallback: { value: undefined },
    envFrom: (env) => {
      const host = env.SOCKS_SERVER_SERVICE_HOST;
      const port = env.SOCKS_SERVER_SERVICE_PORT;
      if (host === undefined && port === undefined) return undefined;
      if (host === undefined || port === undefined) {
        const [set, unset] = host === undefined ? ['SOCKS_SERVER_SERVICE_PORT', 'SOCKS_SERVER_SERVICE_HOST'] : ['SOCKS_SERVER_SERVICE_HOST', 'SOCKS_SERVER_SERVICE_PORT'];
        throw new OptionValueError(`$${set} is set but $${unset} is not (both are needed)`);
      }
      const h = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
      return { text: `${h}:${port}`, variable: 'SOCKS_SERVER_SERVICE_HOST:$SOCKS_SERVER_SERVICE_PORT' };
    },
    parse: (t) => parseSocksServer(t),
  };
}

export function endpointOption(o: Common & { default: string }): OptionSpec<string> {
  return { ...o, name: '', kind: 'value', fallback: { value: o.default }, parse: endpointParser, endpoint: true };
}

/**
 * -l/--selector. Required selectors have no default ("missing required flag"); optional ones
 * default to the empty selector, which matches everything. An empty text is the empty selector.
 */
export function selectorOption(o: { required: boolean; what?: string; ini: IniPlace | null }): OptionSpec<LabelSelector> {
  const what = o.what ?? 'journals';
  return {
    name: '',
    char: 'l',
    description: `Label selector of the ${what} to act on, e.g. "${what === 'shards' ? 'app=foo,id:prefix=acme-' : 'app=foo,name:prefix=acme/'}"${o.required ? '' : ' (default: all)'}.`,
    ini: o.ini,
    kind: 'value',
    fallback: o.required
      ? { missing: 'missing required flag -l/--selector (use -l name:prefix=... or a label selector)' }
      : { value: { include: { labels: [] }, exclude: { labels: [] } } },
    parse: (text) => {
      if (text === '' && o.required) throw new OptionValueError('missing required flag -l/--selector (use -l name:prefix=... or a label selector)');
      return parseLabelSelector(text);
    },
  };
}

/** Gives each descriptor its key as long name. */
export function options<S extends OptionSet>(set: S): S {
  for (const [name, spec] of Object.entries(set)) (spec as { name: string }).name = name;
  return set;
}

// ---- oclif flags ------------------------------------------------------------------------------

/** The oclif flags of an option set: argv syntax and help only; values are resolved below. */
export function oclifFlags(set: OptionSet) {
  const out: Interfaces.FlagInput = {};
  for (const [name, s] of Object.entries(set)) {
    const common = { char: s.char, description: s.description, helpGroup: s.helpGroup, env: s.env };
    if (s.kind === 'boolean') out[name] = Flags.boolean(common);
    else if (s.kind === 'choice') out[name] = Flags.option({ ...common, options: s.choices!, default: s.helpDefault })();
    else if (s.kind === 'multiple') out[name] = Flags.string({ ...common, multiple: true });
    else out[name] = Flags.string({ ...common, default: s.helpDefault });
  }
  return out;
}

// ---- resolution -------------------------------------------------------------------------------

export interface Sources {
  /** oclif's parse output: values, and which flags argv named. */
  argv: Record<string, unknown>;
  given: ReadonlySet<string>;
  ini?: IniFile;
  env: NodeJS.ProcessEnv;
  /** `journals` or `shards`. */
  group: string;
  /** gazctl.ini section of the sub-command (e.g. `journals.list`); undefined for group options. */
  section?: string;
  /** The context in effect (group options only): its values by option long name. */
  context?: { name: string; path: string; values: ReadonlyMap<string, string> };
}

function label(s: OptionSpec<unknown>): string {
  return s.char && s.name === 'selector' ? `-l/--selector` : `--${s.name}`;
}

function parseFrom<T>(s: OptionSpec<T>, text: string, where: string): T {
  try {
    return s.parse(text);
  } catch (err) {
    if (err instanceof OptionValueError || err instanceof ValidationError) {
      const msg = err.message.startsWith('missing required flag') ? err.message : `${label(s)}: ${err.message}`;
      throw new UsageError(msg + where);
    }
    throw err;
  }
}

/** The gazctl.ini places (a section, the keys it may hold `s` under) to look `s` up in, in order. */
function iniPlaces(s: OptionSpec<unknown>, src: Sources): { section: string; keys: string[] }[] {
  if (!s.ini) return [];
  if (src.section !== undefined) return [{ section: src.section, keys: [s.ini.field, s.name, s.char ?? ''].filter(Boolean) }];
  const sub = s.ini.section ?? '';
  const both = [s.ini.field, s.name];
  if (sub === '') return [{ section: src.group, keys: both }];
  // In the group's own section a bare service field (Address, …) of [shards] is ambiguous between
  // the consumer and the broker: there only the namespaced long name counts. Its sub-section
  // ([shards.Consumer], [shards.Broker]) takes the field name like any other.
  const inGroup = src.group === 'shards' && sub !== 'Logging' ? [s.name] : both;
  return [
    { section: `${src.group}.${sub}`, keys: both },
    { section: src.group, keys: inGroup },
  ];
}

/** Resolves every option of `set`: command line > context > gazctl.ini > environment > default. */
export function resolveOptions<S extends OptionSet>(set: S, src: Sources): OptionValues<S> {
  const out: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(set)) {
    out[name] = resolveOne(s, src);
  }
  return out as OptionValues<S>;
}

/** Where an option's value comes from: the command line, a gazctl.ini section, a variable, or its default. */
export type OptionOrigin =
  | { from: 'command line' }
  | { from: 'context'; name: string; path: string }
  | { from: 'gazctl.ini'; path: string; section: string }
  | { from: 'environment'; variable: string }
  | { from: 'default' };

/** The source that sets `s` (by precedence), with its text there; the default has no text. */
function sourceOf(s: OptionSpec<unknown>, src: Sources): { origin: OptionOrigin; text?: string } {
  if (src.given.has(s.name)) return { origin: { from: 'command line' } };
  const ctx = src.context?.values.get(s.name);
  if (ctx !== undefined) return { origin: { from: 'context', name: src.context!.name, path: src.context!.path }, text: ctx };
  for (const place of iniPlaces(s, src)) {
    const text = iniLookup(src.ini, [place.section], place.keys);
    if (text !== undefined) return { origin: { from: 'gazctl.ini', path: src.ini!.path, section: place.section }, text };
  }
  if (s.env !== undefined) {
    const text = src.env[s.env];
    if (text !== undefined) return { origin: { from: 'environment', variable: s.env }, text };
  }
  if (s.envFrom !== undefined) {
    let got: { text: string; variable: string } | undefined;
    try {
      got = s.envFrom(src.env);
    } catch (err) {
      if (err instanceof OptionValueError) throw new UsageError(`${label(s)}: ${err.message}`);
      throw err;
    }
    if (got !== undefined) return { origin: { from: 'environment', variable: got.variable }, text: got.text };
  }
  return { origin: { from: 'default' } };
}

/**
 * An option's value, where it came from and the text that set it (print-config). A required
 * option that nothing sets has no value here (resolution would refuse it); a value that does not
 * parse is refused with a UsageError as resolution does.
 */
export function resolveWithOrigin<T>(s: OptionSpec<T>, src: Sources): { value: T | undefined; origin: OptionOrigin; text?: string } {
  const { origin, text } = sourceOf(s, src);
  if (origin.from === 'default' && 'missing' in s.fallback) return { value: undefined, origin };
  const argvText = origin.from === 'command line' && typeof src.argv[s.name] === 'string' ? (src.argv[s.name] as string) : undefined;
  return { value: resolveOne(s, src), origin, text: text ?? argvText };
}

function resolveOne<T>(s: OptionSpec<T>, src: Sources): T {
  const { origin, text } = sourceOf(s, src);
  switch (origin.from) {
    case 'command line': {
      const v = src.argv[s.name];
      if (s.kind === 'boolean') return v as T;
      if (s.kind === 'multiple') return (v as string[]).flatMap((t) => parseFrom(s, t, '') as unknown[]) as T;
      return parseFrom(s, String(v), '');
    }
    case 'context':
      return parseFrom(s, text!, ` (from context ${origin.name} in ${origin.path})`);
    case 'gazctl.ini':
      return parseFrom(s, text!, ` (from ${origin.path})`);
    case 'environment':
      return parseFrom(s, text!, ` (from $${origin.variable})`);
    case 'default':
      if ('missing' in s.fallback) throw new UsageError(s.fallback.missing);
      return s.fallback.value;
  }
}
