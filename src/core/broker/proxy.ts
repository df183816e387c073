// Forwarding a request to the broker that serves it, with the resolved header attached (which
// tells the receiving broker the request was proxied, and at which etcd revision).

import { Metadata, status as GrpcStatus, type ServerReadableStream, type ServerWritableStream, type ServiceError } from '@grpc/grpc-js';
import type { AppendRequest, AppendResponse, FragmentsRequest, FragmentsResponse, Header, JournalClient, ReadRequest, ReadResponse } from '../../lib/protocol/gen/broker/protocol.js';
import { claimsFor } from '../../lib/client/auth.js';
import type { Peers } from './peers.js';


/**
 * The error to end the client's call with, for a failed forward to `endpoint`. A peer that refuses
 * this broker's own token is a problem between brokers (their `--broker.auth-keys` differ), not
 * of the client's token, so the message says which broker refused and why; otherwise the peer's
 * status passes through as it is.
 */
export function grpcError(e: unknown, endpoint?: string): Partial<ServiceError> {
  const se = e as Partial<ServiceError>;
  let details = se.details ?? (e as Error).message;
  if (se.code === GrpcStatus.UNAUTHENTICATED && endpoint !== undefined) {
    details = `peer broker ${endpoint} refused this broker's proxied call (brokers must share --broker.auth-keys): ${details}`;
  }
  return { code: se.code ?? GrpcStatus.UNAVAILABLE, details, message: details, metadata: new Metadata() };
}

/** A broker to forward to, with the header that names it. */
export interface ProxyTarget {
  endpoint: string;
  header: Header;
}

/** The peer could not be reached at all, so nothing was served and another member may be tried. */
function unreachable(e: unknown): boolean {
  return (e as Partial<ServiceError>).code === GrpcStatus.UNAVAILABLE;
}

/**
 * Forwards a read to the first target, and on to the next while a target cannot be reached
 * before it answered anything: a read has no effect, so trying another member is safe.
 */
export function proxyRead(peers: Peers, targets: ProxyTarget[], call: ServerWritableStream<ReadRequest, ReadResponse>): Promise<void> {
  return new Promise((resolve) => {
    let cancelled = false;
    let up: ReturnType<JournalClient['read']> | undefined;
    const stop = () => {
      cancelled = true;
      up?.cancel();
    };
    call.on('cancelled', stop);
    // The call may also end here, without a cancel from the client (its token expired).
    call.on('close', stop);
    const attempt = (k: number) => {
      const t = targets[k]!;
      let answered = false;
      // Signed by this broker for the journal alone, as a Go broker proxies on its client's behalf.
      const stream = peers.client(t.endpoint).read({ ...call.request, header: t.header }, peers.metadata(claimsFor.journalRead(call.request.journal)));
      up = stream;
      if (cancelled) stream.cancel();
      stream.on('data', (r: ReadResponse) => {
        answered = true;
        if (!call.write(r)) {
          stream.pause();
          call.once('drain', () => stream.resume());
        }
      });
      let failed = false;
      stream.on('error', (e) => {
        // grpc-js ends the stream before it emits the error, and 'end' follows on the next tick:
        // a failed stream must not end the call (nor the call we moved on to).
        failed = true;
        if (!answered && !cancelled && k + 1 < targets.length && unreachable(e)) return attempt(k + 1);
        const ge = grpcError(e, t.endpoint);
        call.emit('error', Object.assign(new Error(ge.details), ge));
        resolve();
      });
      stream.on('end', () => {
        if (failed) return;
        call.end();
        resolve();
      });
    };
    attempt(0);
  });
}

export function proxyAppend(
  peers: Peers,
  endpoint: string,
  header: Header,
  first: AppendRequest,
  rest: AsyncIterator<AppendRequest>,
  call: ServerReadableStream<AppendRequest, AppendResponse>,
): Promise<AppendResponse> {
  return new Promise((resolve, reject) => {
    const md = peers.metadata(claimsFor.journalAppend(first.journal));
    const up = peers.client(endpoint).append(md, (err, res) => (err ? reject(grpcError(err, endpoint)) : resolve(res)));
    call.on('cancelled', () => up.cancel());
    up.write({ ...first, header });
    void (async () => {
      try {
        for (;;) {
          const n = await rest.next();
          if (n.done) break;
          if (!up.write(n.value)) await new Promise((r) => up.once('drain', r));
        }
        up.end();
      } catch {
        up.cancel(); // client went away: the upstream append rolls back
      }
    })();
  });
}

/** Forwards a fragment listing, trying the next target while one cannot be reached. */
export async function proxyFragments(peers: Peers, targets: ProxyTarget[], req: FragmentsRequest): Promise<FragmentsResponse> {
  for (let k = 0; ; k++) {
    const t = targets[k]!;
    try {
      return await new Promise<FragmentsResponse>((resolve, reject) => {
        peers.client(t.endpoint).listFragments({ ...req, header: t.header }, peers.metadata(claimsFor.journalFragments(req.journal)), (err, res) => (err ? reject(err) : resolve(res)));
      });
    } catch (e) {
      if (k + 1 < targets.length && unreachable(e)) continue;
      throw grpcError(e, t.endpoint);
    }
  }
}
