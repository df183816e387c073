// Forwarding a request to the broker that serves it, with the resolved header attached (which
// tells the receiving broker the request was proxied, and at which etcd revision).

import { Metadata, status as GrpcStatus, type ServerReadableStream, type ServerWritableStream, type ServiceError } from '@grpc/grpc-js';
import type { AppendRequest, AppendResponse, FragmentsRequest, FragmentsResponse, Header, ReadRequest, ReadResponse } from '../../lib/protocol/gen/broker/protocol.js';
import type { Peers } from './peers.js';

function grpcError(e: unknown): Partial<ServiceError> {
  const se = e as Partial<ServiceError>;
  return { code: se.code ?? GrpcStatus.UNAVAILABLE, details: se.details ?? (e as Error).message, message: (e as Error).message, metadata: new Metadata() };
}

export function proxyRead(peers: Peers, endpoint: string, header: Header, call: ServerWritableStream<ReadRequest, ReadResponse>): Promise<void> {
  return new Promise((resolve) => {
    const up = peers.client(endpoint).read({ ...call.request, header });
    call.on('cancelled', () => up.cancel());
    up.on('data', (r: ReadResponse) => {
      if (!call.write(r)) {
        up.pause();
        call.once('drain', () => up.resume());
      }
    });
    up.on('error', (e) => {
      call.emit('error', Object.assign(new Error((e as Error).message), grpcError(e)));
      resolve();
    });
    up.on('end', () => {
      call.end();
      resolve();
    });
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
    const up = peers.client(endpoint).append((err, res) => (err ? reject(grpcError(err)) : resolve(res)));
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

export function proxyFragments(peers: Peers, endpoint: string, header: Header, req: FragmentsRequest): Promise<FragmentsResponse> {
  return new Promise((resolve, reject) => {
    peers.client(endpoint).listFragments({ ...req, header }, (err, res) => (err ? reject(grpcError(err)) : resolve(res)));
  });
}
