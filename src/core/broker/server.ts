// One port for gRPC and HTTP, as upstream's brokers and consumers serve both on their service port: each
// connection's first bytes decide. The HTTP/2 connection preface goes to the gRPC server (grpc-js
// takes injected connections); anything else is HTTP/1 for /debug/ready and /metrics.
//
// Either way the bytes read to decide are put back with unshift() and the socket itself is
// handed on. Node's HTTP/2 session then reads the socket's handle natively and feeds what is
// already buffered in the socket to the session first (Node >= 15 does this for a socket with
// buffered data), so no byte goes through a JavaScript stream: wrapping the socket in a Duplex
// made every HTTP/2 frame in both directions cross JS, which cost the broker most of its CPU
// per appended byte.

import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { ServerHttp2Session } from 'node:http2';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { createServer as createTlsServer, type TlsOptions } from 'node:tls';
import { Server as GrpcServer, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import type { JournalServer, ReplicateRequest, ReplicateResponse } from '../../lib/protocol/gen/broker/protocol.js';
import { routeReplicate } from './replicate-server.js';
import { http2ServersOf, type GrpcPaths } from './grpc-internals.js';
import type { Logger } from '../log.js';
import { FastJournalService } from './codec.js';
import { FlushService, type FlushServer } from '../../lib/protocol/gen/gazctl/flush.js';
import { ShardService, type ShardServer } from '../../lib/protocol/gen/consumer/protocol.js';
import type { Metrics } from './metrics.js';
import { serializeReadResponse } from './read-wire.js';

const H2_PREFACE = Buffer.from('PRI * HTTP/2.0');

/**
 * HTTP/2 receive windows of our side of a gRPC connection. Node's default is the protocol's
 * initial 65 535 bytes, for the connection and for each stream, and stays there; with it a client
 * streaming an append (or a primary streaming to a replica) stops after every 64 KiB until our
 * WINDOW_UPDATE comes back, and all streams of a connection share that one window. Upstream's
 * gRPC server grows its windows with the measured bandwidth-delay product, up to 16 MiB; we set
 * fixed ones: a stream may have 4 MiB in flight, a connection 16 MiB.
 */
export const STREAM_WINDOW_BYTES = 4 << 20;
export const CONNECTION_WINDOW_BYTES = 16 << 20;

/**
 * Raises the receive windows of every HTTP/2 session the gRPC server makes. grpc-js has no option
 * for a server's windows, so this reaches its HTTP/2 servers (grpc-internals.ts); false when it
 * cannot, and the connections then keep Node's default windows.
 */
export function raiseReceiveWindows(grpc: GrpcServer): boolean {
  const servers = http2ServersOf(grpc, 'windows');
  if (servers === undefined) return false;
  for (const server of servers) {
    server.on('session', (session: ServerHttp2Session) => {
      try {
        session.settings({ initialWindowSize: STREAM_WINDOW_BYTES });
        session.setLocalWindowSize(CONNECTION_WINDOW_BYTES);
      } catch {
        // a session already closing: nothing to raise
      }
    });
  }
  return true;
}

export interface ServiceServer {
  port: number;
  /** Which path each grpc-js bypass took. */
  paths: GrpcPaths;
  close(): Promise<void>;
}

export async function startServer(opts: {
  host: string;
  port: number;
  /** A broker's protocol.Journal service. */
  journal?: JournalServer;
  /** Our on-demand flush service (gazctl.flush.Flush), beside protocol.Journal. */
  flush?: FlushServer;
  /** A consumer's consumer.Shard service (the consumer process serves on this same server). */
  shard?: ShardServer;
  metrics: Pick<Metrics, 'registry'>;
  ready: () => boolean;
  maxRecvBytes: number;
  /** Told at debug level which paths the grpc-js bypasses took (grpc-internals.ts). */
  log?: Pick<Logger, 'debug'>;
  /**
   * Serve TLS (core/security.ts): the handshake is done here, and the decrypted connection goes
   * to gRPC or HTTP/1 by its first bytes exactly as a plain one does.
   */
  tls?: TlsOptions;
}): Promise<ServiceServer> {
  const grpc = new GrpcServer({
    'grpc.max_receive_message_length': opts.maxRecvBytes,
    'grpc.max_send_message_length': 16 << 20,
    'grpc.keepalive_permit_without_calls': 1,
  });
  // Append and Replicate decode content without a copy (codec.ts); Read's responses may come
  // encoded already (content chunks, see read-wire.ts).
  const journal = opts.journal;
  if (journal) grpc.addService({ ...FastJournalService, read: { ...FastJournalService.read, responseSerialize: serializeReadResponse } }, journal);
  if (opts.flush) grpc.addService(FlushService, opts.flush);
  if (opts.shard) grpc.addService(ShardService, opts.shard);
  const injector = grpc.createConnectionInjector(ServerCredentials.createInsecure());
  const paths: GrpcPaths = {
    receiveWindows: raiseReceiveWindows(grpc) ? 'raised' : 'node default',
    // Replicate streams skip grpc-js's server (replicate-server.ts); the handler is the same.
    replicate: !journal
      ? 'not served'
      : routeReplicate(grpc, (call) => void journal.replicate(call as unknown as ServerDuplexStream<ReplicateRequest, ReplicateResponse>), opts.maxRecvBytes)
        ? 'fast path'
        : 'grpc-js',
  };
  opts.log?.debug('grpc-js paths', { receive_windows: paths.receiveWindows, replicate: paths.replicate });

  const http = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/debug/ready') {
      const ok = opts.ready();
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ready\n' : 'not ready\n');
    } else if (path === '/metrics') {
      opts.metrics.registry
        .metrics()
        .then((body) => res.writeHead(200, { 'content-type': opts.metrics.registry.contentType }).end(body))
        .catch((e: Error) => res.writeHead(500).end(e.message));
    } else res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });

  const sockets = new Set<Socket>();
  const onConnection = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const n = Math.min(head.length, H2_PREFACE.length);
      const isH2 = head.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isH2 && head.length < H2_PREFACE.length) return; // need more bytes to decide
      socket.off('data', onData);
      socket.pause();
      socket.unshift(head);
      if (isH2) injector.injectConnection(socket);
      else {
        http.emit('connection', socket);
        socket.resume();
      }
    };
    socket.on('data', onData);
  };
  const net: NetServer = opts.tls
    ? createTlsServer({ ...opts.tls, noDelay: true } as TlsOptions, onConnection)
    : createNetServer({ pauseOnConnect: false, noDelay: true }, onConnection);
  if (opts.tls) {
    // A failed handshake (an untrusted client certificate, plain text on a TLS port) concerns
    // that one client: say so at debug level and go on.
    net.on('tlsClientError', (e: Error, s: Socket) => {
      opts.log?.debug('TLS handshake failed', { err: e.message, client: s.remoteAddress ?? '' });
      s.destroy();
    });
  }
  await new Promise<void>((resolve, reject) => {
    net.once('error', reject);
    net.listen(opts.port, opts.host || undefined, () => resolve());
  });
  const addr = net.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  return {
    port,
    paths,
    async close() {
      // Give calls in flight a moment, then cut what remains (watches never end by themselves).
      await new Promise<void>((r) => {
        const t = setTimeout(() => {
          grpc.forceShutdown();
          r();
        }, 1000);
        grpc.tryShutdown(() => {
          clearTimeout(t);
          r();
        });
      });
      net.close();
      for (const s of sockets) s.destroy();
      http.close();
    },
  };
}
