// Base classes for gazctl commands: the shared `journals` / `shards` option groups, their
// resolution with upstream's precedence (command line > gazctl.ini > environment > default),
// logging, and one-line error reporting with trustworthy exit codes.
import { Command, Flags } from '@oclif/core';
import { GazctlError } from '../lib/protocol/errors.js';
import { findIniFile, loadIni, iniLookup, type IniFile } from '../lib/config/ini.js';
import { parseGoDuration } from '../lib/protocol/duration.js';
import { Logger, LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from './log.js';

/** Exit codes scripts can rely on. */
export const EXIT = { OK: 0, ERROR: 1, USAGE: 2 } as const;

/** A usage problem: bad flag combination or value. Exit code 2. */
export class UsageError extends GazctlError {
  constructor(message: string) {
    super(message);
    this.exitCode = EXIT.USAGE;
  }
}

interface GlobalSpec {
  /** Go field name used as the gazctl.ini key. */
  field: string;
  /** gazctl.ini sub-section (after the group name) holding the option. */
  section: string;
  env: string;
  def: string;
}

function serviceFlags(prefix: 'broker' | 'consumer', title: string) {
  const up = prefix.toUpperCase();
  return {
    [`${prefix}.address`]: Flags.string({ description: `${title} service endpoint (http://, https:// or unix://).`, helpGroup: title.toUpperCase(), env: `${up}_ADDRESS` }),
    [`${prefix}.cert-file`]: Flags.string({ description: `Client TLS certificate file.`, helpGroup: title.toUpperCase(), env: `${up}_CERT_FILE` }),
    [`${prefix}.cert-key-file`]: Flags.string({ description: `Client TLS private key file.`, helpGroup: title.toUpperCase(), env: `${up}_CERT_KEY_FILE` }),
    [`${prefix}.trusted-ca-file`]: Flags.string({ description: `CA certificate used to verify the server.`, helpGroup: title.toUpperCase(), env: `${up}_TRUSTED_CA_FILE` }),
    [`${prefix}.auth-keys`]: Flags.string({ description: `Whitespace or comma separated base64 keys; the first signs request tokens.`, helpGroup: title.toUpperCase(), env: `${up}_AUTH_KEYS` }),
    [`${prefix}.auth-token`]: Flags.string({ description: `Static bearer token, used when no auth keys are set.`, helpGroup: title.toUpperCase(), env: `${up}_AUTH_TOKEN` }),
    [`${prefix}.cache.size`]: Flags.integer({ description: `Route cache entries; > 0 dispatches straight to route members.`, helpGroup: title.toUpperCase(), env: `${up}_CACHE_SIZE` }),
    [`${prefix}.cache.ttl`]: Flags.string({ description: `Route cache entry lifetime (Go duration).`, helpGroup: title.toUpperCase(), env: `${up}_CACHE_TTL` }),
  };
}

function serviceSpecs(prefix: 'broker' | 'consumer', section: string): Record<string, GlobalSpec> {
  const up = prefix.toUpperCase();
  const def = 'http://localhost:8080'; // upstream's default for both services
  return {
    [`${prefix}.address`]: { field: 'Address', section, env: `${up}_ADDRESS`, def },
    [`${prefix}.cert-file`]: { field: 'CertFile', section, env: `${up}_CERT_FILE`, def: '' },
    [`${prefix}.cert-key-file`]: { field: 'CertKeyFile', section, env: `${up}_CERT_KEY_FILE`, def: '' },
    [`${prefix}.trusted-ca-file`]: { field: 'TrustedCAFile', section, env: `${up}_TRUSTED_CA_FILE`, def: '' },
    [`${prefix}.auth-keys`]: { field: 'AuthKeys', section, env: `${up}_AUTH_KEYS`, def: '' },
    [`${prefix}.auth-token`]: { field: 'AuthToken', section, env: `${up}_AUTH_TOKEN`, def: '' },
    [`${prefix}.cache.size`]: { field: 'Size', section, env: `${up}_CACHE_SIZE`, def: '0' },
    [`${prefix}.cache.ttl`]: { field: 'TTL', section, env: `${up}_CACHE_TTL`, def: '1m' },
  };
}

const commonFlags = {
  zone: Flags.string({ description: 'Availability zone of this client, preferred when dispatching directly.', env: 'ZONE', helpGroup: 'GLOBAL' }),
  'log.level': Flags.option({ options: LOG_LEVELS, description: 'Log level (default warn).', env: 'LOG_LEVEL', helpGroup: 'GLOBAL' })(),
  'log.format': Flags.option({ options: LOG_FORMATS, description: 'Log format (default text).', env: 'LOG_FORMAT', helpGroup: 'GLOBAL' })(),
  timeout: Flags.string({ description: 'Give up on an unreachable service after this long (Go duration; 0 waits forever).', env: 'GAZCTL_TIMEOUT', helpGroup: 'GLOBAL' }),
};

const commonSpecs: Record<string, GlobalSpec> = {
  zone: { field: 'Zone', section: '', env: 'ZONE', def: 'local' },
  'log.level': { field: 'Level', section: 'Logging', env: 'LOG_LEVEL', def: 'warn' },
  'log.format': { field: 'Format', section: 'Logging', env: 'LOG_FORMAT', def: 'text' },
  timeout: { field: 'Timeout', section: '', env: 'GAZCTL_TIMEOUT', def: '30s' },
};

export const journalsBaseFlags = { ...commonFlags, ...serviceFlags('broker', 'Broker') };
export const shardsBaseFlags = { ...commonFlags, ...serviceFlags('consumer', 'Consumer'), ...serviceFlags('broker', 'Broker') };

export interface ServiceOptions {
  address: string;
  certFile?: string;
  certKeyFile?: string;
  trustedCAFile?: string;
  authKeys?: string;
  authToken?: string;
  cacheSize: number;
  cacheTTLms: number;
  zone: string;
  timeoutMs: number;
}

type AnyFlags = Record<string, unknown>;

/** Flags whose gazctl.ini values must parse as integers. */
const INTEGER_FLAGS = new Set(['broker.cache.size', 'consumer.cache.size', 'max-txn-size']);

/** Common machinery for every gazctl command. */
export abstract class GazctlCommand extends Command {
  /** `journals` or `shards`: names the option group and the gazctl.ini sections. */
  static group: 'journals' | 'shards' = 'journals';
  /** Go field names of sub-command flags, for gazctl.ini lookups ([journals.list] Selector = …). */
  static iniFields: Record<string, string> = {};

  protected log_!: Logger;
  protected resolved: AnyFlags = {};
  private ini?: IniFile;

  protected get groupName(): 'journals' | 'shards' {
    return (this.constructor as typeof GazctlCommand).group;
  }

  /** Parses argv, then fills in flags not given on the command line from gazctl.ini. */
  protected async parseResolved<F extends AnyFlags, A extends AnyFlags = AnyFlags>(): Promise<{ flags: F; args: A }> {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const ctor = this.constructor as any;
    const { flags, args, raw } = await this.parse(ctor);
    const given = new Set(raw.filter((r) => r.type === 'flag').map((r) => (r as { flag: string }).flag));
    this.ini = loadIni(findIniFile());
    const out: AnyFlags = { ...(flags as AnyFlags) };
    const group = this.groupName;
    const specs: Record<string, GlobalSpec> =
      group === 'journals'
        ? { ...commonSpecs, ...serviceSpecs('broker', 'Broker') }
        : { ...commonSpecs, ...serviceSpecs('consumer', 'Consumer'), ...serviceSpecs('broker', 'Broker') };
    const defs = (ctor.flags ?? {}) as Record<string, { type: string; char?: string; options?: readonly string[]; multiple?: boolean }>;
    const allDefs = { ...((ctor as unknown as { baseFlags?: typeof defs }).baseFlags ?? {}), ...defs };

    // Global group options: flag > ini > env > default. oclif already folded env into the
    // flag value, so an ini value must override anything not given on the command line.
    for (const [name, spec] of Object.entries(specs)) {
      if (given.has(name)) continue;
      const sections = spec.section ? [`${group}.${spec.section}`, group] : [group];
      // In [shards], a bare Address would be ambiguous: only the namespaced name counts there.
      const keys = group === 'shards' && spec.section !== '' && spec.field !== 'Level' && spec.field !== 'Format' ? [name] : [spec.field, name];
      const fromIni = iniLookup(this.ini, sections, keys);
      if (fromIni !== undefined) out[name] = this.coerce(name, fromIni, allDefs[name]);
      else if (out[name] === undefined) out[name] = this.coerce(name, spec.def, allDefs[name]);
    }
    // Sub-command options: flag > ini > default.
    const iniFields: Record<string, string> = ctor.iniFields ?? {};
    const section = `${group}.${String(ctor.id ?? '').split(/[: ]/).slice(1).join('.')}`;
    for (const [name, def] of Object.entries(defs)) {
      if (given.has(name) || name in specs) continue;
      const keys = [iniFields[name] ?? '', name, def.char ?? ''].filter(Boolean);
      const fromIni = iniLookup(this.ini, [section], keys);
      if (fromIni !== undefined) out[name] = this.coerce(name, fromIni, def);
    }
    this.resolved = out;
    this.log_ = new Logger(out['log.level'] as LogLevel, out['log.format'] as LogFormat);
    return { flags: out as F, args: args as A };
  }

  private coerce(name: string, value: string, def?: { type: string; options?: readonly string[]; multiple?: boolean }): unknown {
    const where = this.ini ? ` (from ${this.ini.path})` : '';
    if (!def) return value;
    if (def.type === 'boolean') {
      if (value === 'true') return true;
      if (value === 'false') return false;
      throw new UsageError(`--${name}: expected true or false, got ${JSON.stringify(value)}${where}`);
    }
    if (def.options && !def.options.includes(value)) {
      throw new UsageError(`--${name}: expected one of ${def.options.join(', ')}, got ${JSON.stringify(value)}${where}`);
    }
    if (INTEGER_FLAGS.has(name)) {
      if (!/^-?\d+$/.test(value)) throw new UsageError(`--${name}: expected an integer, got ${JSON.stringify(value)}${where}`);
      return Number(value);
    }
    if (def.multiple) return [value];
    return value;
  }

  protected serviceOptions(prefix: 'broker' | 'consumer'): ServiceOptions {
    const f = this.resolved;
    const ttl = parseDurationFlag(`${prefix}.cache.ttl`, String(f[`${prefix}.cache.ttl`] ?? '1m'));
    const timeout = parseDurationFlag('timeout', String(f.timeout ?? '30s'));
    const opt = (k: string) => {
      const v = f[`${prefix}.${k}`];
      return typeof v === 'string' && v !== '' ? v : undefined;
    };
    return {
      address: opt('address') ?? 'http://localhost:8080',
      certFile: opt('cert-file'),
      certKeyFile: opt('cert-key-file'),
      trustedCAFile: opt('trusted-ca-file'),
      authKeys: opt('auth-keys'),
      authToken: opt('auth-token'),
      cacheSize: Number(f[`${prefix}.cache.size`] ?? 0),
      cacheTTLms: Number(ttl / 1_000_000n),
      zone: String(f.zone ?? 'local'),
      timeoutMs: Number(timeout / 1_000_000n),
    };
  }

  /** Every failure becomes one line on stderr and a non-zero exit code. */
  protected override async catch(err: Error & { exitCode?: number; oclif?: { exit?: number } }): Promise<void> {
    if (err.oclif?.exit === 0) return; // --help, --version
    const code = err instanceof GazctlError ? err.exitCode : err.oclif?.exit !== undefined ? EXIT.USAGE : EXIT.ERROR;
    // oclif spreads a parse error over lines ("Parsing --x", "<reason>", "See more help ...").
    const first = String(err.message ?? err)
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !/^See more help/.test(l))
      .join(': ')
      .replace(/^Error: /, '');
    process.stderr.write(`gazctl: ${first}\n`);
    if (this.log_?.enabled('debug') && err.stack) process.stderr.write(err.stack + '\n');
    process.exitCode = code;
  }
}

export function parseDurationFlag(name: string, value: string): bigint {
  try {
    const ns = parseGoDuration(value);
    if (ns < 0n) throw new Error('negative');
    return ns;
  } catch {
    throw new UsageError(`--${name}: invalid duration ${JSON.stringify(value)} (use Go syntax such as 30s, 5m, 1h30m)`);
  }
}
