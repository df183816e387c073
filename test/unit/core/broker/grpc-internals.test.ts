// Tripwire of our broker's reach into grpc-js (src/core/broker/grpc-internals.ts): when a grpc-js
// upgrade moves its private `http2Servers`, the receive windows and the Replicate fast path fall
// back to the public path without an error; this test fails instead. It also checks the fallback
// itself (GAZCTL_GRPC_INTERNALS=0) still serves Replicate, through grpc-js.
import assert from 'node:assert/strict';
import { connect, type ClientHttp2Session } from 'node:http2';
import { afterEach, describe, it } from 'node:test';
import { Server as GrpcServer, ServerCredentials, status as GrpcStatus } from '@grpc/grpc-js';

import { http2ServersOf } from '../../../../src/core/broker/grpc-internals.js';
import { RawReplicateCall, REPLICATE_PATH } from '../../../../src/core/broker/replicate-server.js';
import { CONNECTION_WINDOW_BYTES, startServer, STREAM_WINDOW_BYTES, type ServiceServer } from '../../../../src/core/broker/server.js';
import { Metrics } from '../../../../src/core/broker/metrics.js';
import type { JournalServer } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { FastJournalService } from '../../../../src/core/broker/codec.js';

/** A Replicate call that the handler refuses at once; resolves with the grpc-status the client saw. */
async function replicateOnce(session: ClientHttp2Session): Promise<string> {
  const stream = session.request({ ':method': 'POST', ':path': REPLICATE_PATH, 'content-type': 'application/grpc', te: 'trailers' });
  stream.end();
  return new Promise<string>((resolve, reject) => {
    let status: string | undefined;
    const note = (h: Record<string, unknown>) => {
      if (h['grpc-status'] !== undefined) status = String(h['grpc-status']);
    };
    stream.on('response', note);
    stream.on('trailers', note);
    stream.on('data', () => undefined);
    stream.on('close', () => (status === undefined ? reject(new Error('no grpc-status')) : resolve(status)));
    stream.on('error', reject);
  });
}

async function connected(port: number): Promise<ClientHttp2Session> {
  const session = connect(`http://127.0.0.1:${port}`);
  await new Promise<void>((resolve, reject) => {
    session.once('remoteSettings', () => resolve());
    session.once('error', reject);
  });
  // Settings and window updates the server sends on a new session come before its ping answer.
  await new Promise<void>((resolve, reject) => session.ping((e) => (e ? reject(e) : resolve())));
  return session;
}

describe('grpc-js internals our broker relies on', () => {
  let server: ServiceServer | undefined;
  let session: ClientHttp2Session | undefined;
  afterEach(async () => {
    session?.close();
    session = undefined;
    await server?.close();
    server = undefined;
    delete process.env.GAZCTL_GRPC_INTERNALS;
  });

  const start = async (calls: unknown[], debug: [string, unknown][]) => {
    const journal = {
      replicate: (call: { emit(ev: string, e: unknown): void }) => {
        calls.push(call);
        call.emit('error', { code: GrpcStatus.FAILED_PRECONDITION, details: 'seen by the test' });
      },
    } as unknown as JournalServer;
    return startServer({
      host: '127.0.0.1',
      port: 0,
      journal,
      metrics: new Metrics(),
      ready: () => true,
      maxRecvBytes: 1 << 20,
      log: { debug: (msg: string, f?: unknown) => debug.push([msg, f]) },
    });
  };

  it('finds the HTTP/2 servers of a grpc-js server (the private field is still there)', () => {
    const grpc = new GrpcServer();
    grpc.addService(FastJournalService, {} as JournalServer);
    grpc.createConnectionInjector(ServerCredentials.createInsecure());
    const servers = http2ServersOf(grpc, 'replicate');
    assert.ok(servers !== undefined && servers.length === 1, 'grpc-js no longer keeps its node:http2 servers in `http2Servers`: see grpc-internals.ts');
    assert.ok(servers[0]!.listeners('stream').length > 0, "grpc-js no longer serves through the http2 server's 'stream' event");
  });

  it('takes the fast paths: raised windows, Replicate served from the HTTP/2 stream, and says so at debug level', async () => {
    const calls: unknown[] = [];
    const debug: [string, unknown][] = [];
    server = await start(calls, debug);
    assert.deepEqual(server.paths, { receiveWindows: 'raised', replicate: 'fast path' });
    assert.deepEqual(debug, [['grpc-js paths', { receive_windows: 'raised', replicate: 'fast path' }]]);
    session = await connected(server.port);
    assert.equal(session.remoteSettings.initialWindowSize, STREAM_WINDOW_BYTES);
    assert.equal(session.state.remoteWindowSize, CONNECTION_WINDOW_BYTES);
    assert.equal(await replicateOnce(session), String(GrpcStatus.FAILED_PRECONDITION));
    assert.equal(calls.length, 1);
    assert.ok(calls[0] instanceof RawReplicateCall, 'Replicate did not take the fast path');
  });

  it('with GAZCTL_GRPC_INTERNALS=0 keeps to the public path, and Replicate is still served', async () => {
    process.env.GAZCTL_GRPC_INTERNALS = '0';
    const calls: unknown[] = [];
    const debug: [string, unknown][] = [];
    server = await start(calls, debug);
    assert.deepEqual(server.paths, { receiveWindows: 'node default', replicate: 'grpc-js' });
    assert.deepEqual(debug, [['grpc-js paths', { receive_windows: 'node default', replicate: 'grpc-js' }]]);
    session = await connected(server.port);
    assert.equal(session.remoteSettings.initialWindowSize, 65_535);
    assert.equal(await replicateOnce(session), String(GrpcStatus.FAILED_PRECONDITION));
    assert.equal(calls.length, 1);
    assert.ok(!(calls[0] instanceof RawReplicateCall));
  });
});
