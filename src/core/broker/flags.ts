// `gazette serve` options: the flags and environment variables of upstream's broker, parsed
// without a CLI framework so the daemon starts fast and its errors are one line.
//
// A flag is `--name=value` or `--name value`; a boolean flag takes no value (or `=true|false`).
// A flag given on the command line wins over its environment variable, which wins over the
// default. TLS and auth keys work as upstream's (see core/security.ts), and so does TLS to etcd
// (lib/keyspace/tls.ts). Options we do not implement (CORS, auto-suspend, the debug port) are
// accepted by name for drop-in compatibility and refused with one clear line when set, rather
// than silently ignored.

import { LOG_LEVELS as LEVELS, type LogLevel } from '../log.js';
import { optionHelpLine, parseBool, parseDurationNs, parseInt10, UsageError } from '../options.js';

export { UsageError };

export interface ServeConfig {
  zone: string;
  id: string;
  host: string;
  port: number;
  limit: number;
  fileRoot: string;
  fileOnly: boolean;
  maxAppendRate: number;
  maxReplication: number;
  minAppendRate: number;
  watchDelayMs: number;
  /** Endpoint advertised in the member key instead of http(s)://<host>:<port> ('' when not set). */
  advertise: string;
  etcdAddress: string;
  /** TLS files for https:// etcd endpoints ('' when not set). */
  etcdCertFile: string;
  etcdCertKeyFile: string;
  etcdTrustedCAFile: string;
  etcdLeaseSeconds: number;
  etcdPrefix: string;
  logLevel: LogLevel;
  logFormat: 'json' | 'text' | 'color';
  maxGrpcRecvSize: number;
  serverCertFile: string;
  serverCertKeyFile: string;
  serverCAFile: string;
  peerCertFile: string;
  peerCertKeyFile: string;
  peerCAFile: string;
  authKeys: string;
}

export type { LogLevel };

type Kind = 'string' | 'int' | 'bool' | 'duration';
interface FlagDef {
  name: string;
  env: string;
  kind: Kind;
  def: string;
  help: string;
  /** Accepted for compatibility but not implemented: refused when set. */
  unsupported?: boolean;
}

export const SERVE_FLAGS: readonly FlagDef[] = [
  { name: 'broker.zone', env: 'BROKER_ZONE', kind: 'string', def: 'local', help: 'Availability zone within which this process is running' },
  { name: 'broker.id', env: 'BROKER_ID', kind: 'string', def: '', help: 'Unique ID of this process. Auto-generated if not set' },
  { name: 'broker.host', env: 'BROKER_HOST', kind: 'string', def: '', help: 'Addressable, advertised hostname or IP of this process. Hostname is used if not set' },
  { name: 'broker.port', env: 'BROKER_PORT', kind: 'string', def: '', help: 'Service port for HTTP and gRPC requests. A random port is used if not set' },
  { name: 'broker.server-cert-file', env: 'BROKER_SERVER_CERT_FILE', kind: 'string', def: '', help: 'Path to the server TLS certificate. This option toggles whether TLS is used. If absent, all other TLS settings are ignored.' },
  { name: 'broker.server-cert-key-file', env: 'BROKER_SERVER_CERT_KEY_FILE', kind: 'string', def: '', help: 'Path to the server TLS private key' },
  { name: 'broker.server-ca-file', env: 'BROKER_SERVER_CA_FILE', kind: 'string', def: '', help: 'Path to the trusted CA for server verification of client certificates. When present, client certificates are required and verified against this CA. When absent, client certificates are not required but are verified against the system CA pool if presented.' },
  { name: 'broker.peer-cert-file', env: 'BROKER_PEER_CERT_FILE', kind: 'string', def: '', help: 'Path to the client TLS certificate for peer-to-peer requests' },
  { name: 'broker.peer-cert-key-file', env: 'BROKER_PEER_CERT_KEY_FILE', kind: 'string', def: '', help: 'Path to the client TLS private key for peer-to-peer requests' },
  { name: 'broker.peer-ca-file', env: 'BROKER_PEER_CA_FILE', kind: 'string', def: '', help: 'Path to the trusted CA for client verification of peer server certificates. When absent, the system CA pool is used instead' },
  { name: 'broker.max-grpc-recv-size', env: 'BROKER_MAX_GRPC_RECV_SIZE', kind: 'int', def: '4194304', help: 'Maximum size of gRPC messages accepted by this server, in bytes' },
  { name: 'broker.allow-origin', env: 'BROKER_ALLOW_ORIGIN', kind: 'string', def: '', help: 'Origin to allow in CORS contexts (not supported yet)', unsupported: true },
  { name: 'broker.limit', env: 'BROKER_LIMIT', kind: 'int', def: '1024', help: 'Maximum number of Journals the broker will allocate' },
  { name: 'broker.file-root', env: 'BROKER_FILE_ROOT', kind: 'string', def: '', help: 'Local path which roots file:// fragment stores (optional)' },
  { name: 'broker.file-only', env: 'BROKER_FILE_ONLY', kind: 'bool', def: 'false', help: 'Use the local file:// store for all journal fragments, ignoring cloud bucket storage configuration' },
  { name: 'broker.max-append-rate', env: 'BROKER_MAX_APPEND_RATE', kind: 'int', def: '0', help: 'Max rate (in bytes-per-sec) that any one journal may be appended to. If zero, there is no max rate' },
  { name: 'broker.max-replication', env: 'BROKER_MAX_REPLICATION', kind: 'int', def: '9', help: 'Maximum effective replication of any one journal, which upper-bounds its stated replication' },
  { name: 'broker.advertise', env: 'BROKER_ADVERTISE', kind: 'string', def: '', help: 'Endpoint other processes dial to reach this broker, advertised instead of http(s)://<broker.host>:<broker.port>, e.g. a proxy in front of it (not an upstream flag)' },
  { name: 'broker.min-append-rate', env: 'BROKER_MIN_APPEND_RATE', kind: 'int', def: '65536', help: 'Min rate (in bytes-per-sec) at which a client may stream Append RPC content' },
  { name: 'broker.watch-delay', env: 'BROKER_WATCH_DELAY', kind: 'duration', def: '30ms', help: 'Delay applied to the application of watched Etcd events' },
  { name: 'broker.auth-keys', env: 'BROKER_AUTH_KEYS', kind: 'string', def: '', help: 'Whitespace or comma separated, base64-encoded keys used to sign (first key) and verify (all keys) Authorization tokens' },
  { name: 'broker.auto-suspend', env: 'BROKER_AUTO_SUSPEND', kind: 'bool', def: 'false', help: 'Automatically suspend journals which have persisted all fragments (not supported yet)', unsupported: true },
  { name: 'etcd.address', env: 'ETCD_ADDRESS', kind: 'string', def: 'http://etcd:2379', help: 'Etcd service address endpoint' },
  { name: 'etcd.cert-file', env: 'ETCD_CERT_FILE', kind: 'string', def: '', help: 'Path to the client TLS certificate' },
  { name: 'etcd.cert-key-file', env: 'ETCD_CERT_KEY_FILE', kind: 'string', def: '', help: 'Path to the client TLS private key' },
  { name: 'etcd.trusted-ca-file', env: 'ETCD_TRUSTED_CA_FILE', kind: 'string', def: '', help: 'Path to the trusted CA for client verification of server certificates' },
  { name: 'etcd.lease', env: 'ETCD_LEASE_TTL', kind: 'duration', def: '20s', help: 'Time-to-live of Etcd lease' },
  { name: 'etcd.prefix', env: 'ETCD_PREFIX', kind: 'string', def: '/gazette/cluster', help: 'Etcd base prefix for broker state and coordination' },
  { name: 'log.level', env: 'LOG_LEVEL', kind: 'string', def: 'warn', help: 'Logging level [trace|debug|info|warn|error|fatal]' },
  { name: 'log.format', env: 'LOG_FORMAT', kind: 'string', def: 'text', help: 'Logging output format [json|text|color]' },
  { name: 'debug.port', env: 'DEBUG_PORT', kind: 'string', def: '', help: 'Port for diagnostics (not supported yet: diagnostics are on the service port)', unsupported: true },
  { name: 'debug.private', env: 'DEBUG_PRIVATE', kind: 'bool', def: 'false', help: "When true, don't serve diagnostics over the main service port (not supported yet)", unsupported: true },
];

export function serveHelp(): string {
  const lines = [
    'Usage:',
    '  gazette [OPTIONS] serve',
    '',
    'Serve a Gazette broker with the provided configuration, until signaled to exit (via',
    'SIGTERM). Upon receiving a signal, the broker hands off its journals and exits once it',
    'can safely do so.',
    '',
  ];
  for (const f of SERVE_FLAGS) {
    lines.push(optionHelpLine(f, 34));
  }
  return lines.join('\n') + '\n';
}




/** Parse the arguments after `serve`, with `env` for the environment variables. */
export function parseServeArgs(args: readonly string[], env: NodeJS.ProcessEnv): ServeConfig {
  const byName = new Map(SERVE_FLAGS.map((f) => [f.name, f]));
  const given = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (!a.startsWith('--')) throw new UsageError(`unexpected argument ${JSON.stringify(a)}`);
    const eq = a.indexOf('=');
    const name = eq >= 0 ? a.slice(2, eq) : a.slice(2);
    const f = byName.get(name);
    if (!f) throw new UsageError(`unknown flag --${name}`);
    let value: string;
    if (eq >= 0) value = a.slice(eq + 1);
    else if (f.kind === 'bool') value = 'true';
    else {
      const next = args[i + 1];
      if (next === undefined) throw new UsageError(`expected argument for flag --${name}`);
      value = next;
      i++;
    }
    given.set(name, value);
  }
  const raw = (name: string): string => {
    const f = byName.get(name)!;
    const v = given.get(name) ?? env[f.env];
    if (v !== undefined && v !== '' && f.unsupported && !(f.kind === 'bool' && !parseBool(name, v))) {
      throw new UsageError(`--${name} (${f.env}) is not supported by this broker yet`);
    }
    return v ?? f.def;
  };
  for (const f of SERVE_FLAGS) if (f.unsupported) raw(f.name);

  const level = raw('log.level').toLowerCase() as LogLevel;
  if (!LEVELS.includes(level)) throw new UsageError(`invalid value ${JSON.stringify(level)} for --log.level: one of ${LEVELS.join(', ')}`);
  const format = raw('log.format').toLowerCase();
  if (format !== 'json' && format !== 'text' && format !== 'color') {
    throw new UsageError(`invalid value ${JSON.stringify(format)} for --log.format: one of json, text, color`);
  }
  const portText = raw('broker.port');
  if (portText.startsWith('unix:')) throw new UsageError('--broker.port: unix domain sockets are not supported by this broker yet');
  const port = portText === '' ? 0 : parseInt10('broker.port', portText);
  if (port < 0 || port > 65535) throw new UsageError(`invalid value ${JSON.stringify(portText)} for --broker.port: not a port`);
  const leaseMs = Number(parseDurationNs('etcd.lease', raw('etcd.lease')) / 1_000_000n);
  if (leaseMs < 1000) throw new UsageError('--etcd.lease must be at least 1s');
  const prefix = raw('etcd.prefix');
  if (!prefix.startsWith('/') || prefix.endsWith('/')) {
    throw new UsageError(`invalid value ${JSON.stringify(prefix)} for --etcd.prefix: must start and not end with /`);
  }
  const nonNeg = (name: string) => {
    const n = parseInt10(name, raw(name));
    if (n < 0) throw new UsageError(`invalid value ${n} for --${name}: must not be negative`);
    return n;
  };
  return {
    zone: raw('broker.zone'),
    id: raw('broker.id'),
    host: raw('broker.host'),
    port,
    limit: nonNeg('broker.limit'),
    fileRoot: raw('broker.file-root'),
    fileOnly: parseBool('broker.file-only', raw('broker.file-only')),
    maxAppendRate: nonNeg('broker.max-append-rate'),
    maxReplication: nonNeg('broker.max-replication'),
    minAppendRate: nonNeg('broker.min-append-rate'),
    watchDelayMs: Number(parseDurationNs('broker.watch-delay', raw('broker.watch-delay')) / 1_000_000n),
    advertise: advertiseEndpoint(raw('broker.advertise')),
    etcdAddress: raw('etcd.address'),
    etcdCertFile: raw('etcd.cert-file'),
    etcdCertKeyFile: raw('etcd.cert-key-file'),
    etcdTrustedCAFile: raw('etcd.trusted-ca-file'),
    etcdLeaseSeconds: Math.max(1, Math.round(leaseMs / 1000)),
    etcdPrefix: prefix,
    logLevel: level,
    logFormat: format,
    maxGrpcRecvSize: nonNeg('broker.max-grpc-recv-size'),
    serverCertFile: raw('broker.server-cert-file'),
    serverCertKeyFile: raw('broker.server-cert-key-file'),
    serverCAFile: raw('broker.server-ca-file'),
    peerCertFile: raw('broker.peer-cert-file'),
    peerCertKeyFile: raw('broker.peer-cert-key-file'),
    peerCAFile: raw('broker.peer-ca-file'),
    authKeys: raw('broker.auth-keys'),
  };
}

/** `--broker.advertise`: empty, or an http(s)://host:port endpoint (no path). */
function advertiseEndpoint(v: string): string {
  if (v === '' || /^https?:\/\/(\[[0-9a-fA-F:.]+\]|[^/:?#@\s\[\]]+):\d{1,5}$/.test(v)) return v;
  throw new UsageError(`invalid value ${JSON.stringify(v)} for --broker.advertise: not an endpoint URL (http://host:port or https://host:port)`);
}
