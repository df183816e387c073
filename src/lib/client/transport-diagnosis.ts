// Telling apart the ways a call can fail before a service answers, so that the caller hears the
// cause at once rather than "unreachable" after its whole time budget:
//
// - the server's TLS certificate does not verify (untrusted CA, wrong host name, expired): no
//   retry can help, so the attempt fails with reason `untrusted-certificate`;
// - a plain-text (http://) endpoint whose server speaks TLS: grpc-js only reports that the
//   connection failed, so on such a failure we probe the port with a TLS handshake (once per
//   target) and, when it completes, fail with reason `tls-expected`;
// - a call that was sent on an established connection and got no answer before its deadline:
//   reason `no-answer`. A Gazette broker does
//   this when its etcd does not respond. A call that never got a connection still reads
//   "unreachable";
// - an endpoint whose host name does not exist (grpc-js: "Name resolution failed"; the resolver
//   answers ENOTFOUND): reason `unresolved`, at once. No retry makes a name exist, and the
//   default addresses are Kubernetes Service names (`gazette`, `consumer`) that an operator's
//   laptop does not resolve: they must hear that, not wait out --timeout. A resolver that fails
//   or times out (EAI_AGAIN) is left to the retries.
import { lookup } from 'node:dns/promises';
import { connect as tlsConnect } from 'node:tls';
import { status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { TransportError } from '../protocol/errors.js';
import { parseEndpoint } from '../protocol/route.js';
import { grpcCode } from './retry.js';
import { socksConnect, socksServer } from '../socks.js';

/** Node's TLS verification failures, as they appear in grpc-js details. */
const UNTRUSTED =
  /self[- ]signed certificate|unable to verify the first certificate|unable to get (local )?issuer certificate|certificate has expired|certificate is not yet valid|Hostname\/IP does not match|does not match certificate's altnames|ERR_TLS_CERT_ALTNAME_INVALID|certificate signature failure|certificate revoked/i;

function details(err: unknown): string {
  return String((err as ServiceError | undefined)?.details ?? '');
}

/** The endpoint URL named in `who` ("broker http://h:p"). */
function endpointOf(who: string): string | undefined {
  return /\b(?:https?|unix):\/\/\S+/.exec(who)?.[0];
}

const tlsProbes = new Map<string, Promise<boolean>>();

/** Whether `host:port` completes a TLS handshake (any certificate) within a second. */
export function speaksTls(host: string, port: number): Promise<boolean> {
  const key = `${host}:${port}`;
  let p = tlsProbes.get(key);
  if (!p) {
    p = new Promise<boolean>((resolve) => {
      const tls = { rejectUnauthorized: false, ALPNProtocols: ['h2'], ...(isIpLiteral(host) ? {} : { servername: host }) };
      let s: ReturnType<typeof tlsConnect> | undefined;
      let settled = false;
      const done = (v: boolean) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        s?.destroy();
        resolve(v);
      };
      const timer = setTimeout(() => done(false), 1000);
      const start = (t: ReturnType<typeof tlsConnect>) => {
        s = t;
        if (settled) t.destroy();
        t.once('secureConnect', () => done(true));
        t.once('error', () => done(false));
      };
      // The probe takes the way every other connection takes: through the SOCKS proxy, if set.
      const socks = socksServer();
      if (socks) {
        socksConnect(socks, host, port, 1000).then(
          (socket) => start(tlsConnect({ socket, ...tls })),
          () => done(false),
        );
      } else {
        start(tlsConnect({ host, port, ...tls }));
      }
    });
    tlsProbes.set(key, p);
    // A later failure may have another cause: probe again then.
    void p.then(() => setTimeout(() => tlsProbes.delete(key), 5000).unref());
  }
  return p;
}

const nameProbes = new Map<string, Promise<boolean>>();

/** Whether DNS says `host` does not exist (ENOTFOUND); false when it resolves or the resolver fails otherwise. */
export function nameMissing(host: string): Promise<boolean> {
  let p = nameProbes.get(host);
  if (!p) {
    p = lookup(host).then(
      () => false,
      (err: NodeJS.ErrnoException) => err.code === 'ENOTFOUND',
    );
    nameProbes.set(host, p);
    // The answer may change (a Service being created): look again after a while.
    void p.then(() => setTimeout(() => nameProbes.delete(host), 5000).unref());
  }
  return p;
}

function isIpLiteral(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':');
}

/**
 * Runs one attempt of a call to the service `who` ("broker <address>") and, when it fails in one
 * of the ways above, replaces the gRPC error by a TransportError with that reason (which retry
 * loops do not retry).
 */
export async function diagnosed<T>(attempt: Promise<T>, who: string, deadline?: number): Promise<T> {
  try {
    return await attempt;
  } catch (err) {
    throw (await diagnose(err, who, deadline)) ?? err;
  }
}

/** The TransportError for `err`, when its cause is one of the above; undefined otherwise. */
export async function diagnose(err: unknown, who: string, deadline?: number): Promise<TransportError | undefined> {
  if (err instanceof TransportError) return undefined;
  const code = grpcCode(err);
  const d = details(err);
  if (code === GrpcStatus.UNAVAILABLE && UNTRUSTED.test(d)) {
    const why = UNTRUSTED.exec(d)![0];
    // No gRPC code: retry loops must not take this for a transient UNAVAILABLE.
    return new TransportError(`${who}: TLS certificate of the server is not trusted (${why})`, undefined, { cause: err, reason: 'untrusted-certificate', endpoint: endpointOf(who) });
  }
  if (code === GrpcStatus.UNAVAILABLE && /Name resolution failed/i.test(d)) {
    const ep = endpointOf(who);
    if (ep && !ep.startsWith('unix:')) {
      const [host] = splitTarget(parseEndpoint(ep).target);
      if (!isIpLiteral(host) && (await nameMissing(host))) {
        return new TransportError(`${who}: host name "${host}" does not resolve`, undefined, { cause: err, reason: 'unresolved', endpoint: ep });
      }
    }
  }
  if (code === GrpcStatus.UNAVAILABLE && /Failed to connect|Connection dropped|Protocol error|ECONNRESET|socket hang up/i.test(d)) {
    const ep = endpointOf(who);
    if (ep && ep.startsWith('http://')) {
      const [host, port] = splitTarget(parseEndpoint(ep).target);
      if (port && (await speaksTls(host, port))) {
        return new TransportError(`${who} speaks TLS, but was dialled in plain text`, undefined, { cause: err, reason: 'tls-expected', endpoint: ep });
      }
    }
  }
  // Out of time on a connection that stood. That shows as grpc-js' own deadline naming the peer
  // (remote_addr=…), as the server's "context deadline exceeded", or as the server resetting the
  // stream when its copy of the deadline fires first (CANCELLED, "Call cancelled").
  const late = deadline !== undefined && Date.now() >= deadline - 100;
  if (
    (code === GrpcStatus.DEADLINE_EXCEEDED && /remote_addr=|context deadline exceeded/.test(d)) ||
    (code === GrpcStatus.CANCELLED && late && /Call cancelled/.test(d))
  ) {
    return new TransportError(`${who} accepted the connection but did not answer in time`, code, { cause: err, reason: 'no-answer', endpoint: endpointOf(who) });
  }
  return undefined;
}

function splitTarget(target: string): [string, number | undefined] {
  const i = target.lastIndexOf(':');
  if (i < 0) return [target, undefined];
  return [target.slice(0, i).replace(/^\[|\]$/g, ''), Number(target.slice(i + 1))];
}
