// The options of a consumer process: those of upstream's runconsumer (its BaseConfig: the
// Consumer, Broker, Etcd, Logging and Debug groups), from the command line, the environment and
// a `gazette.ini` file, as go-flags reads them there:
//
//   * a flag is `--group.name=value` or `--group.name value` (booleans take no value);
//   * precedence: command line, then gazette.ini, then the environment variable, then the
//     default (go-flags applies an environment variable only to an option nothing else set);
//   * gazette.ini is the first of ./gazette.ini, $HOME/.config/gazette/gazette.ini and
//     %UserProfile%/.config/gazette/gazette.ini that exists; its sections are the groups'
//     names ([Consumer], [Broker], [Etcd], [Logging], [Debug]) and its keys the Go field names
//     (Zone, Limit, MaxHotStandbys, LeaseTTL, …) or the long names without the group (zone,
//     limit, max-hot-standbys, lease);
//   * `print-config` writes the combined configuration as go-flags' INI writer does with
//     comments and defaults: `; <description>`, then `Field = value`, commented out (`; `) while
//     it is the default.
//
// TLS and auth keys work as upstream's (core/security.ts), for the service port and for the
// broker client, and so does TLS to etcd (lib/keyspace/tls.ts). CORS and the private
// diagnostics port are accepted for drop-in compatibility, and refused with one clear line when
// set: this consumer does not implement them.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { iniLookup, parseIni, type IniFile } from '../../lib/config/ini.js';
import { formatGoDuration, parseGoDuration } from '../../lib/protocol/duration.js';
import { LOG_LEVELS, type LogLevel } from '../log.js';
import { optionHelpLine, parseBool, parseDurationNs, parseInt10, UsageError } from '../options.js';

export { UsageError };

export interface ConsumerConfig {
  zone: string;
  id: string;
  host: string;
  port: number;
  maxGrpcRecvSize: number;
  limit: number;
  maxHotStandbys: number;
  watchDelayMs: number;
  brokerAddress: string;
  brokerCacheSize: number;
  brokerCacheTtlMs: number;
  fileRoot: string;
  etcdAddress: string;
  /** TLS files for https:// etcd endpoints ('' or absent when not set). */
  etcdCertFile?: string;
  etcdCertKeyFile?: string;
  etcdTrustedCAFile?: string;
  etcdLeaseSeconds: number;
  /** Empty: the application's default (runConsumer's `defaultPrefix`). */
  etcdPrefix: string;
  logLevel: LogLevel;
  logFormat: 'json' | 'text' | 'color';
  // TLS and authorization (security.md); empty or absent: off.
  serverCertFile?: string;
  serverCertKeyFile?: string;
  serverCAFile?: string;
  peerCertFile?: string;
  peerCertKeyFile?: string;
  peerCAFile?: string;
  /** Keys verifying calls to this consumer (and signing its calls to its peers). */
  authKeys?: string;
  brokerCertFile?: string;
  brokerCertKeyFile?: string;
  brokerTrustedCAFile?: string;
  brokerAuthKeys?: string;
  brokerAuthToken?: string;
}

type Kind = 'string' | 'int' | 'bool' | 'duration' | 'list';
export interface FlagDef {
  /** Group (INI section), as go-flags names it. */
  group: 'Consumer' | 'Broker' | 'Etcd' | 'Logging' | 'Debug';
  /** Long name with its namespace: `consumer.zone`. */
  name: string;
  /** Go field name: the INI key go-flags writes. */
  field: string;
  env: string;
  kind: Kind;
  def: string;
  help: string;
  /** Accepted for compatibility but not implemented: refused when set. */
  unsupported?: boolean;
}

const f = (group: FlagDef['group'], name: string, field: string, env: string, kind: Kind, def: string, help: string, unsupported = false): FlagDef => ({
  group,
  name,
  field,
  env,
  kind,
  def,
  help,
  ...(unsupported ? { unsupported } : {}),
});

/** In go-flags' order (struct order), which print-config follows. */
export const CONSUMER_FLAGS: readonly FlagDef[] = [
  f('Consumer', 'consumer.zone', 'Zone', 'CONSUMER_ZONE', 'string', 'local', 'Availability zone within which this process is running'),
  f('Consumer', 'consumer.id', 'ID', 'CONSUMER_ID', 'string', '', 'Unique ID of this process. Auto-generated if not set'),
  f('Consumer', 'consumer.host', 'Host', 'CONSUMER_HOST', 'string', '', 'Addressable, advertised hostname or IP of this process. Hostname is used if not set'),
  f('Consumer', 'consumer.port', 'Port', 'CONSUMER_PORT', 'string', '', 'Service port for HTTP and gRPC requests. A random port is used if not set'),
  f('Consumer', 'consumer.server-cert-file', 'ServerCertFile', 'CONSUMER_SERVER_CERT_FILE', 'string', '', 'Path to the server TLS certificate. This option toggles whether TLS is used. If absent, all other TLS settings are ignored.'),
  f('Consumer', 'consumer.server-cert-key-file', 'ServerCertKeyFile', 'CONSUMER_SERVER_CERT_KEY_FILE', 'string', '', 'Path to the server TLS private key'),
  f('Consumer', 'consumer.server-ca-file', 'ServerCAFile', 'CONSUMER_SERVER_CA_FILE', 'string', '', 'Path to the trusted CA for server verification of client certificates. When present, client certificates are required and verified against this CA. When absent, client certificates are not required but are verified against the system CA pool if presented.'),
  f('Consumer', 'consumer.peer-cert-file', 'PeerCertFile', 'CONSUMER_PEER_CERT_FILE', 'string', '', 'Path to the client TLS certificate for peer-to-peer requests'),
  f('Consumer', 'consumer.peer-cert-key-file', 'PeerCertKeyFile', 'CONSUMER_PEER_CERT_KEY_FILE', 'string', '', 'Path to the client TLS private key for peer-to-peer requests'),
  f('Consumer', 'consumer.peer-ca-file', 'PeerCAFile', 'CONSUMER_PEER_CA_FILE', 'string', '', 'Path to the trusted CA for client verification of peer server certificates. When absent, the system CA pool is used instead.'),
  f('Consumer', 'consumer.max-grpc-recv-size', 'MaxGRPCRecvSize', 'CONSUMER_MAX_GRPC_RECV_SIZE', 'int', '4194304', 'Maximum size of gRPC messages accepted by this server, in bytes'),
  f('Consumer', 'consumer.allow-origin', 'AllowOrigin', 'CONSUMER_ALLOW_ORIGIN', 'list', '', 'Origin to allow in CORS contexts (not supported yet)', true),
  f('Consumer', 'consumer.limit', 'Limit', 'CONSUMER_LIMIT', 'int', '32', 'Maximum number of Shards this consumer process will allocate'),
  f('Consumer', 'consumer.max-hot-standbys', 'MaxHotStandbys', 'CONSUMER_MAX_HOT_STANDBYS', 'int', '3', 'Maximum effective hot standbys of any one shard, which upper-bounds its stated hot-standbys.'),
  f('Consumer', 'consumer.watch-delay', 'WatchDelay', 'CONSUMER_WATCH_DELAY', 'duration', '30ms', 'Delay applied to the application of watched Etcd events. Larger values amortize the processing of fast-changing Etcd keys.'),
  f('Consumer', 'consumer.auth-keys', 'AuthKeys', 'CONSUMER_AUTH_KEYS', 'string', '', 'Whitespace or comma separated, base64-encoded keys used to sign (first key) and verify (all keys) Authorization tokens.'),
  f('Broker', 'broker.address', 'Address', 'BROKER_ADDRESS', 'string', 'http://gazette:8080', 'Service address endpoint'),
  f('Broker', 'broker.cert-file', 'CertFile', 'BROKER_CERT_FILE', 'string', '', 'Path to the client TLS certificate'),
  f('Broker', 'broker.cert-key-file', 'CertKeyFile', 'BROKER_CERT_KEY_FILE', 'string', '', 'Path to the client TLS private key'),
  f('Broker', 'broker.trusted-ca-file', 'TrustedCAFile', 'BROKER_TRUSTED_CA_FILE', 'string', '', 'Path to the trusted CA for client verification of server certificates'),
  f('Broker', 'broker.auth-keys', 'AuthKeys', 'BROKER_AUTH_KEYS', 'string', '', 'Whitespace or comma separated, base64-encoded keys. The first key is used to sign Authorization tokens.'),
  f('Broker', 'broker.auth-token', 'AuthToken', 'BROKER_AUTH_TOKEN', 'string', '', 'Bearer token to use for authentication.'),
  f('Broker', 'broker.cache.size', 'Size', 'BROKER_CACHE_SIZE', 'int', '0', 'Size of client route cache. If <= zero, no cache is used (server always proxies)'),
  f('Broker', 'broker.cache.ttl', 'TTL', 'BROKER_CACHE_TTL', 'duration', '1m', 'Time-to-live of route cache entries.'),
  f('Broker', 'broker.file-root', 'FileRoot', 'BROKER_FILE_ROOT', 'string', '', 'Local path which roots file:// fragment URLs which are being directly read (optional)'),
  f('Etcd', 'etcd.address', 'Address', 'ETCD_ADDRESS', 'string', 'http://etcd:2379', 'Etcd service address endpoint'),
  f('Etcd', 'etcd.cert-file', 'CertFile', 'ETCD_CERT_FILE', 'string', '', 'Path to the client TLS certificate'),
  f('Etcd', 'etcd.cert-key-file', 'CertKeyFile', 'ETCD_CERT_KEY_FILE', 'string', '', 'Path to the client TLS private key'),
  f('Etcd', 'etcd.trusted-ca-file', 'TrustedCAFile', 'ETCD_TRUSTED_CA_FILE', 'string', '', 'Path to the trusted CA for client verification of server certificates'),
  f('Etcd', 'etcd.lease', 'LeaseTTL', 'ETCD_LEASE_TTL', 'duration', '20s', 'Time-to-live of Etcd lease'),
  f('Etcd', 'etcd.prefix', 'Prefix', 'ETCD_PREFIX', 'string', '', 'Etcd prefix for the consumer group'),
  f('Logging', 'log.level', 'Level', 'LOG_LEVEL', 'string', 'warn', 'Logging level'),
  f('Logging', 'log.format', 'Format', 'LOG_FORMAT', 'string', 'text', 'Logging output format'),
  f('Debug', 'debug.port', 'Port', 'DEBUG_PORT', 'string', '', 'Port for diagnostics (not supported yet: diagnostics are on the service port)', true),
  f('Debug', 'debug.private', 'Private', 'DEBUG_PRIVATE', 'bool', 'false', "When true, don't serve diagnostics over the main service port (not supported yet)", true),
];

export const INI_FILENAME = 'gazette.ini';

/** The gazette.ini a consumer reads (see the file comment), or undefined. */
export function findConsumerIni(cwd: string, env: NodeJS.ProcessEnv): string | undefined {
  const candidates = [join(cwd, INI_FILENAME)];
  if (env.HOME) candidates.push(join(env.HOME, '.config', 'gazette', INI_FILENAME));
  if (env.UserProfile) candidates.push(join(env.UserProfile, '.config', 'gazette', INI_FILENAME));
  return candidates.find((p) => existsSync(p));
}

export function usage(bin: string): string {
  const lines = [
    'Usage:',
    `  ${bin} [OPTIONS] <command>`,
    '',
    'Commands:',
    '  print-config  Print combined configuration and exit',
    '  serve         Serve as Gazette consumer',
    '',
  ];
  let group = '';
  for (const d of CONSUMER_FLAGS) {
    if (d.group !== group) {
      group = d.group;
      lines.push(`${group}:`);
    }
    lines.push(optionHelpLine(d, 36));
  }
  return lines.join('\n') + '\n';
}




export interface ParsedOptions {
  command: 'serve' | 'print-config' | 'help';
  /** Every option's resolved text, by long name. */
  values: Map<string, string>;
  iniPath: string | undefined;
}

/**
 * Splits `argv` (after the program name) into the command and the options, resolving each from
 * the command line, gazette.ini, the environment and its default. Options may come before or
 * after the command, as with go-flags.
 */
export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv, cwd: string, ini?: IniFile): ParsedOptions {
  const byName = new Map(CONSUMER_FLAGS.map((d) => [d.name, d]));
  const given = new Map<string, string>();
  let command: ParsedOptions['command'] | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '-h' || a === '--help') {
      command = 'help';
      continue;
    }
    if (!a.startsWith('--')) {
      if (command !== undefined && command !== 'help') throw new UsageError(`unexpected argument ${JSON.stringify(a)}`);
      if (a !== 'serve' && a !== 'print-config') throw new UsageError(`Unknown command \`${a}'. Please specify one command of: print-config or serve`);
      if (command !== 'help') command = a;
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq >= 0 ? a.slice(2, eq) : a.slice(2);
    const d = byName.get(name);
    if (!d) throw new UsageError(`unknown flag \`${name}'`);
    let value: string;
    if (eq >= 0) value = a.slice(eq + 1);
    else if (d.kind === 'bool') value = 'true';
    else {
      const next = argv[i + 1];
      if (next === undefined) throw new UsageError(`expected argument for flag \`--${name}'`);
      value = next;
      i++;
    }
    given.set(name, value);
  }
  if (command === undefined) throw new UsageError('Please specify one command of: print-config or serve');
  let iniPath: string | undefined;
  if (!ini) {
    iniPath = findConsumerIni(cwd, env);
    if (iniPath) {
      try {
        ini = parseIni(readFileSync(iniPath, 'utf8'), iniPath);
      } catch (e) {
        throw new UsageError(`${iniPath}: ${(e as Error).message}`);
      }
    }
  } else iniPath = ini.path;
  if (ini) {
    // go-flags refuses keys it does not know; so do we, rather than silently ignore a typo.
    for (const [section, keys] of ini.sections) {
      for (const key of keys.keys()) {
        const known = CONSUMER_FLAGS.some(
          (d) => d.group.toLowerCase() === section && (d.field === key || d.field.toLowerCase() === key.toLowerCase() || d.name.slice(d.name.indexOf('.') + 1) === key),
        );
        if (!known) throw new UsageError(`${ini.path}: unknown option ${JSON.stringify(key)} in section [${section}]`);
      }
    }
  }
  const values = new Map<string, string>();
  for (const d of CONSUMER_FLAGS) {
    const short = d.name.slice(d.name.indexOf('.') + 1);
    const v = given.get(d.name) ?? iniLookup(ini, [d.group], [d.field, short]) ?? env[d.env] ?? d.def;
    values.set(d.name, v);
  }
  return { command, values, iniPath };
}

/** The typed configuration of `serve`; refuses unsupported options that are set. */
export function toConfig(values: Map<string, string>): ConsumerConfig {
  const raw = (name: string): string => values.get(name)!;
  for (const d of CONSUMER_FLAGS) {
    if (!d.unsupported) continue;
    const v = raw(d.name);
    if (v !== '' && !(d.kind === 'bool' && !parseBool(d.name, v))) {
      throw new UsageError(`--${d.name} (${d.env}) is not supported by this consumer yet`);
    }
  }
  const level = raw('log.level').toLowerCase() as LogLevel;
  if (!LOG_LEVELS.includes(level)) throw new UsageError(`invalid value ${JSON.stringify(level)} for --log.level: one of ${LOG_LEVELS.join(', ')}`);
  const format = raw('log.format').toLowerCase();
  if (format !== 'json' && format !== 'text' && format !== 'color') {
    throw new UsageError(`invalid value ${JSON.stringify(format)} for --log.format: one of json, text, color`);
  }
  const portText = raw('consumer.port');
  if (portText.startsWith('unix:')) throw new UsageError('--consumer.port: unix domain sockets are not supported by this consumer yet');
  const port = portText === '' ? 0 : parseInt10('consumer.port', portText);
  if (port < 0 || port > 65535) throw new UsageError(`invalid value ${JSON.stringify(portText)} for --consumer.port: not a port`);
  const leaseNs = parseDurationNs('etcd.lease', raw('etcd.lease'));
  if (leaseNs < 1_000_000_000n) throw new UsageError('--etcd.lease must be at least 1s');
  const prefix = raw('etcd.prefix');
  if (prefix !== '' && (!prefix.startsWith('/') || prefix.endsWith('/'))) {
    throw new UsageError(`invalid value ${JSON.stringify(prefix)} for --etcd.prefix: must start and not end with /`);
  }
  const nonNeg = (name: string) => {
    const n = parseInt10(name, raw(name));
    if (n < 0) throw new UsageError(`invalid value ${n} for --${name}: must not be negative`);
    return n;
  };
  const address = raw('broker.address');
  if (!/^(https?|unix):\/\//.test(address)) throw new UsageError(`invalid value ${JSON.stringify(address)} for --broker.address: not an endpoint URL (http://host:port)`);
  if (address.startsWith('unix:')) throw new UsageError(`--broker.address ${address}: unix:// endpoints are not supported by this consumer yet`);
  return {
    zone: raw('consumer.zone'),
    id: raw('consumer.id'),
    host: raw('consumer.host'),
    port,
    maxGrpcRecvSize: nonNeg('consumer.max-grpc-recv-size'),
    limit: nonNeg('consumer.limit'),
    maxHotStandbys: nonNeg('consumer.max-hot-standbys'),
    watchDelayMs: Number(parseDurationNs('consumer.watch-delay', raw('consumer.watch-delay')) / 1_000_000n),
    brokerAddress: address,
    brokerCacheSize: parseInt10('broker.cache.size', raw('broker.cache.size')),
    brokerCacheTtlMs: Number(parseDurationNs('broker.cache.ttl', raw('broker.cache.ttl')) / 1_000_000n),
    fileRoot: raw('broker.file-root'),
    etcdAddress: raw('etcd.address'),
    etcdCertFile: raw('etcd.cert-file'),
    etcdCertKeyFile: raw('etcd.cert-key-file'),
    etcdTrustedCAFile: raw('etcd.trusted-ca-file'),
    etcdLeaseSeconds: Math.max(1, Number(leaseNs / 1_000_000_000n)),
    etcdPrefix: prefix,
    logLevel: level,
    logFormat: format,
    serverCertFile: raw('consumer.server-cert-file'),
    serverCertKeyFile: raw('consumer.server-cert-key-file'),
    serverCAFile: raw('consumer.server-ca-file'),
    peerCertFile: raw('consumer.peer-cert-file'),
    peerCertKeyFile: raw('consumer.peer-cert-key-file'),
    peerCAFile: raw('consumer.peer-ca-file'),
    authKeys: raw('consumer.auth-keys'),
    brokerCertFile: raw('broker.cert-file'),
    brokerCertKeyFile: raw('broker.cert-key-file'),
    brokerTrustedCAFile: raw('broker.trusted-ca-file'),
    brokerAuthKeys: raw('broker.auth-keys'),
    brokerAuthToken: raw('broker.auth-token'),
  };
}

/** A value as go-flags prints it: durations in Go's format, the rest as given. */
function printValue(d: FlagDef, v: string): string {
  if (d.kind === 'duration') {
    try {
      return formatGoDuration(parseGoDuration(v.trim()));
    } catch {
      return v;
    }
  }
  if (d.kind === 'bool') return parseBool(d.name, v) ? 'true' : 'false';
  // go-flags quotes a string that is not printable.
  return /^[\x20-\x7e]*$/.test(v) ? v : JSON.stringify(v);
}

/** `print-config`: the combined configuration in INI format, as go-flags writes it. */
export function printConfig(values: Map<string, string>): string {
  const out: string[] = [];
  let group = '';
  for (const d of CONSUMER_FLAGS) {
    if (d.group !== group) {
      group = d.group;
      out.push(`[${group}]`);
    }
    const v = values.get(d.name) ?? d.def;
    const isDefault = v === d.def;
    out.push(`; ${d.help.replace(/ \(not supported yet[^)]*\)$/, '')}`);
    const shown = printValue(d, v);
    out.push(`${isDefault ? '; ' : ''}${d.field} =${shown === '' ? '' : ' ' + shown}`);
    out.push('');
  }
  return out.join('\n') + '\n';
}
