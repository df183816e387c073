// TLS and authorization of our daemons (broker and consumer process), as upstream's server
// options have them:
//
//   * `--*.server-cert-file` turns TLS on for the service port (both gRPC and HTTP); without it
//     every other TLS option is ignored. `--*.server-ca-file` makes client certificates
//     required and checked against that CA; without it none is asked for.
//   * `--*.peer-cert-file` / `-key-file` / `-ca-file` are the client side of calls to other
//     members (a broker's proxied reads and appends and its Replicate streams; a consumer's
//     proxied Stat): the certificate presented, and the CA that peers' certificates must chain
//     to (the system roots when not given).
//   * `--etcd.trusted-ca-file` / `--etcd.cert-file` / `--etcd.cert-key-file` are the client
//     side of the daemon's etcd connection, used for `https://` etcd endpoints only, as
//     upstream's (lib/keyspace/tls.ts).
//   * `--*.auth-keys` makes every call carry a bearer token signed by one of the keys
//     (lib/client/verify.ts); the daemon signs its own calls to peers with the first key.

import { readFileSync } from 'node:fs';
import { createSecureContext, type SecureContext, type TlsOptions } from 'node:tls';
import { Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { makeAuthorizer, type Authorizer } from '../lib/client/auth.js';
import { AuthError, KeyVerifier } from '../lib/client/verify.js';
import type { LabelSelector } from '../lib/protocol/gen/broker/protocol.js';
import { rewritePrefixLabels } from '../lib/protocol/selector.js';
import { UsageError } from './options.js';
import { EtcdTlsError, etcdEndpointsSecure, loadEtcdTls, type EtcdTls } from '../lib/keyspace/tls.js';
import { Keyspace } from '../lib/keyspace/index.js';
import { warnUnresolvableEtcd } from './etcd-names.js';
import type { Logger } from './log.js';

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  caFile: string;
}

/** What a daemon needs to serve and call securely; built once at start-up. */
export interface Security {
  /** TLS options of the service port, or undefined to serve in the clear. */
  serverTls?: TlsOptions;
  /** TLS context of calls to peers' https:// endpoints. */
  peerTls: SecureContext;
  /** Verifier of incoming calls, or undefined when auth keys are not set (every call allowed). */
  verifier?: KeyVerifier;
  /** Signs this daemon's own calls to its peers (nothing when auth keys are not set). */
  authorize: Authorizer;
  /** CA and client certificate of the etcd connection (https:// etcd endpoints only). */
  etcd?: EtcdTls;
}

/** The `--etcd.address` list as the keyspace client takes it. */
export function etcdEndpoints(address: string): string[] {
  return address.split(',').map((s) => s.trim());
}

/**
 * TLS towards etcd from the `--etcd.*` options: read and checked when the endpoints are
 * https://, as upstream reads them only then; undefined otherwise. A bad file (or a mix of
 * http:// and https:// endpoints) is a UsageError naming the option.
 */
export function buildEtcdTls(address: string, files: { certFile?: string; certKeyFile?: string; trustedCAFile?: string }): EtcdTls | undefined {
  let secure: boolean;
  try {
    secure = etcdEndpointsSecure(etcdEndpoints(address));
  } catch (e) {
    throw new UsageError(`--etcd.address: ${(e as Error).message}`);
  }
  if (!secure) return undefined;
  try {
    return loadEtcdTls(files);
  } catch (e) {
    if (e instanceof EtcdTlsError) throw new UsageError(`--etcd.${e.option}: ${e.message}`);
    throw e;
  }
}

/** The one start-up line for etcd TLS options given with http:// etcd endpoints (they are unused). */
export function unusedEtcdTlsNote(address: string, files: { certFile?: string; certKeyFile?: string; trustedCAFile?: string }): string | undefined {
  const set = ([['cert-file', files.certFile], ['cert-key-file', files.certKeyFile], ['trusted-ca-file', files.trustedCAFile]] as const).filter(([, v]) => v);
  if (set.length === 0 || etcdEndpoints(address).some((e) => /^https:\/\//i.test(e))) return undefined;
  return `${set.map(([n]) => `--etcd.${n}`).join(', ')} ignored: --etcd.address ${address} is not https://`;
}

function read(path: string, what: string, flag: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new UsageError(`--${flag}: reading ${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/** Checks cert and key load and go together (createSecureContext says which is wrong). */
function context(opts: TlsOptions, flag: string): SecureContext {
  try {
    return createSecureContext(opts);
  } catch (e) {
    throw new UsageError(`--${flag}: ${(e as Error).message}`);
  }
}

/**
 * Builds the daemon's security from its options; `ns` is the option namespace (`broker` or
 * `consumer`). Unreadable or mismatched files are a UsageError naming the option.
 */
export function buildSecurity(ns: string, server: TlsFiles, peer: TlsFiles, authKeys: string): Security {
  let serverTls: TlsOptions | undefined;
  let peerTls: SecureContext;
  if (server.certFile !== '') {
    if (server.keyFile === '') throw new UsageError(`--${ns}.server-cert-file needs --${ns}.server-cert-key-file`);
    const cert = read(server.certFile, 'certificate', `${ns}.server-cert-file`);
    const key = read(server.keyFile, 'private key', `${ns}.server-cert-key-file`);
    const ca = server.caFile !== '' ? read(server.caFile, 'CA certificate', `${ns}.server-ca-file`) : undefined;
    serverTls = {
      cert,
      key,
      ...(ca ? { ca, requestCert: true, rejectUnauthorized: true } : { requestCert: false }),
      // gRPC clients offer only h2; anything that also offers http/1.1 (browsers, curl) gets it,
      // as upstream chooses.
      ALPNProtocols: ['http/1.1', 'h2'],
    };
    context(serverTls, `${ns}.server-cert-file`);
  }
  if (server.certFile !== '' && peer.certFile !== '' && peer.keyFile === '') throw new UsageError(`--${ns}.peer-cert-file needs --${ns}.peer-cert-key-file`);
  // Upstream builds the peer TLS settings only when the server's are given.
  const usePeer = server.certFile !== '';
  const pcert = usePeer && peer.certFile !== '' ? read(peer.certFile, 'certificate', `${ns}.peer-cert-file`) : undefined;
  const pkey = usePeer && peer.certFile !== '' ? read(peer.keyFile, 'private key', `${ns}.peer-cert-key-file`) : undefined;
  const pca = usePeer && peer.caFile !== '' ? read(peer.caFile, 'CA certificate', `${ns}.peer-ca-file`) : undefined;
  peerTls = context({ ...(pcert ? { cert: pcert, key: pkey } : {}), ...(pca ? { ca: pca } : {}) }, `${ns}.peer-cert-file`);

  let verifier: KeyVerifier | undefined;
  let authorize: Authorizer = () => undefined;
  if (authKeys.trim() !== '') {
    try {
      verifier = new KeyVerifier(authKeys);
    } catch (e) {
      throw new UsageError(`--${ns}.auth-keys: parsing authorization keys: ${(e as Error).message}`);
    }
    authorize = makeAuthorizer({ authKeys });
  }
  return { ...(serverTls ? { serverTls } : {}), peerTls, ...(verifier ? { verifier } : {}), authorize };
}

/** The advertised endpoint of a daemon listening on `host:port`. */
export function serviceEndpoint(host: string, port: number, tls: boolean): string {
  return `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** What a verified call may touch: its selector (`prefix` labels rewritten) and its expiry. */
export interface CallClaims {
  /** Undefined: everything (no auth keys, or a token whose selector is empty). */
  sel?: LabelSelector;
  /** Expiry in seconds since the epoch (Infinity without auth keys). */
  exp: number;
}

/** The incoming metadata's first `authorization` value. */
function authorizationOf(md: Pick<Metadata, 'get'> | undefined): string | undefined {
  const v = md?.get('authorization')[0];
  return v === undefined ? undefined : typeof v === 'string' ? v : v.toString('utf8');
}

function unauthenticated(message: string): ServiceError {
  return Object.assign(new Error(message), { code: GrpcStatus.UNAUTHENTICATED, details: message, metadata: new Metadata() });
}

/**
 * Verifies a call that needs the `require` capability bits: its claims, or a ServiceError with
 * status UNAUTHENTICATED to end the call with. Without a verifier every call is allowed.
 */
export function verifyCall(verifier: KeyVerifier | undefined, md: Pick<Metadata, 'get'> | undefined, require: number): CallClaims {
  if (!verifier) return { exp: Infinity };
  try {
    const c = verifier.verify(authorizationOf(md), require);
    const empty = (c.sel.include?.labels.length ?? 0) === 0 && (c.sel.exclude?.labels.length ?? 0) === 0;
    // The claims selector is applied as a request's selector is, `prefix` meta-label included.
    return { exp: c.exp, ...(empty ? {} : { sel: rewritePrefixLabels(c.sel) }) };
  } catch (e) {
    if (e instanceof AuthError) throw unauthenticated(e.message);
    throw unauthenticated(`verifying Authorization: ${(e as Error).message}`);
  }
}

/** A ServiceError refusing a change outside the caller's claims, as upstream words it. */
export function notAuthorized(name: string): ServiceError {
  return unauthenticated(`not authorized to ${name}`);
}

/** setTimeout's longest delay; a later expiry is not timed (tokens last an hour or so). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Calls `onExpiry` when the call's token expires, as upstream bounds a verified call's context
 * by the token's `exp` (a long Read or a List watch ends then, and the client comes back with a
 * fresh token). Returns the function that stops the timer.
 */
export function atExpiry(claims: CallClaims, onExpiry: () => void): () => void {
  if (!Number.isFinite(claims.exp)) return () => {};
  const ms = claims.exp * 1000 - Date.now();
  if (ms > MAX_TIMER_MS) return () => {};
  const t = setTimeout(onExpiry, Math.max(0, ms));
  t.unref();
  return () => clearTimeout(t);
}

/** The status a call cut at its token's expiry ends with, as a Go server's context deadline. */
export function expiredError(): ServiceError {
  const message = 'context deadline exceeded';
  return Object.assign(new Error(message), { code: GrpcStatus.DEADLINE_EXCEEDED, details: message, metadata: new Metadata() });
}

/** The etcd options a daemon's configuration carries (broker and consumer alike). */
export interface EtcdConfig {
  etcdAddress: string;
  etcdCertFile?: string;
  etcdCertKeyFile?: string;
  etcdTrustedCAFile?: string;
}

/**
 * The daemon's etcd client: TLS from `preset` (already checked at start-up) or else from the
 * `--etcd.*` files, one warning when those files are given for http:// endpoints (unused), and
 * one, in the background, for an endpoint whose host name does not resolve.
 */
export function openDaemonKeyspace(config: EtcdConfig, preset: EtcdTls | undefined, log: Logger): Keyspace {
  const files = { certFile: config.etcdCertFile, certKeyFile: config.etcdCertKeyFile, trustedCAFile: config.etcdTrustedCAFile };
  const tls = preset ?? buildEtcdTls(config.etcdAddress, files);
  const unused = unusedEtcdTlsNote(config.etcdAddress, files);
  if (unused) log.warn(unused);
  const endpoints = etcdEndpoints(config.etcdAddress);
  const ks = new Keyspace({ endpoints, ...(tls ? { tls } : {}), debug: (msg, f) => log.debug(msg, f) });
  void warnUnresolvableEtcd(endpoints, log);
  return ks;
}
