// One port for gRPC and HTTP, as upstream's broker serves both on its service port: each
// connection's first bytes decide. The HTTP/2 connection preface goes to the gRPC server (grpc-js
// takes injected connections); anything else is HTTP/1 for /debug/ready and /metrics.
//
// Either way the bytes read to decide are put back with unshift() and the socket itself is handed
// over. Node's HTTP/2 session takes over the socket's native handle and first consumes whatever
// is already buffered on the JS side (Node 20 does; our engines floor). Wrapping the socket in a
// JS duplex instead would make every HTTP/2 frame in either direction pass through JS stream
// code, which costs more CPU than the RPCs themselves on bulk reads and appends.

import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { Server as GrpcServer, ServerCredentials } from '@grpc/grpc-js';
import { JournalService, type JournalServer } from '../../lib/protocol/gen/broker/protocol.js';
import { FlushService, type FlushServer } from '../../lib/protocol/gen/gazctl/flush.js';
import type { Metrics } from './metrics.js';
import { serializeReadResponse } from './read-wire.js';

const H2_PREFACE = Buffer.from('PRI * HTTP/2.0');

export interface ServiceServer {
  port: number;
  close(): Promise<void>;
}

export async function startServer(opts: {
  host: string;
  port: number;
  journal: JournalServer;
  /** Our on-demand flush service (gazctl.flush.Flush), beside protocol.Journal. */
  flush?: FlushServer;
  metrics: Metrics;
  ready: () => boolean;
  maxRecvBytes: number;
}): Promise<ServiceServer> {
  const grpc = new GrpcServer({
    'grpc.max_receive_message_length': opts.maxRecvBytes,
    'grpc.max_send_message_length': 16 << 20,
    'grpc.keepalive_permit_without_calls': 1,
  });
  // Read's responses may come encoded already (content chunks, see read-wire.ts).
  grpc.addService({ ...JournalService, read: { ...JournalService.read, responseSerialize: serializeReadResponse } }, opts.journal);
  if (opts.flush) grpc.addService(FlushService, opts.flush);
  const injector = grpc.createConnectionInjector(ServerCredentials.createInsecure());

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
  const net: NetServer = createNetServer({ pauseOnConnect: false, noDelay: true }, (socket) => {
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
  });
  await new Promise<void>((resolve, reject) => {
    net.once('error', reject);
    net.listen(opts.port, opts.host || undefined, () => resolve());
  });
  const addr = net.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  return {
    port,
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
