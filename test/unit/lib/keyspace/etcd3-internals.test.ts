// Tripwire of our reach into etcd3 (src/lib/keyspace/etcd3-internals.ts): a Watch stream must
// carry `hasleader: true` metadata, which only etcd3's private connection pool lets us add. When
// an etcd3 upgrade moves the pool, watches quietly lose etcd's leader-loss fail-over; this test
// fails instead. A grpc-js server on loopback stands in for etcd's Watch service and records the
// metadata each stream arrives with.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Metadata, Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { Etcd3 } from 'etcd3';

import { Keyspace } from '../../../../src/lib/keyspace/client.js';
import { etcd3Pool, openWatchStream } from '../../../../src/lib/keyspace/etcd3-internals.js';

describe('etcd3 internals the keyspace client relies on', () => {
  let server: Server;
  let port = 0;
  const seen: Metadata[] = [];
  let arrived: (() => void) | undefined;

  before(async () => {
    server = new Server();
    const raw = (b: Buffer) => b;
    server.register(
      '/etcdserverpb.Watch/Watch',
      (call: ServerDuplexStream<Buffer, Buffer>) => {
        seen.push(call.metadata);
        arrived?.();
        call.on('data', () => undefined);
        call.on('end', () => call.end());
      },
      raw,
      raw,
      'bidi',
    );
    port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  });
  after(() => server.forceShutdown());

  const nextStream = () => new Promise<void>((r) => (arrived = r));

  it('finds the connection pool of an Etcd3 (the private field is still there)', () => {
    const rpc = new Etcd3({ hosts: `http://127.0.0.1:${port}` });
    try {
      assert.ok(etcd3Pool(rpc), 'etcd3 no longer has `pool.withConnection`: see etcd3-internals.ts');
    } finally {
      rpc.close();
    }
  });

  it('opens Watch streams with hasleader metadata, and says so at debug level once', async () => {
    const debug: [string, Record<string, unknown>][] = [];
    const ks = new Keyspace({ endpoints: `http://127.0.0.1:${port}`, debug: (m, f) => debug.push([m, f]) });
    try {
      for (let i = 0; i < 2; i++) {
        const got = nextStream();
        const stream = await ks.openWatchStream();
        stream.write({ create_request: { key: Buffer.from('/x') } });
        await got;
        assert.deepEqual(seen.at(-1)!.get('hasleader'), ['true'], 'the Watch stream went out without hasleader metadata');
        stream.end();
      }
      assert.deepEqual(debug, [['etcd watch stream', { path: 'hasleader', hasleader: true }]]);
    } finally {
      ks.close();
    }
  });

  it('falls back to the public stream, without the metadata, when the pool is not there', async () => {
    const rpc = new Etcd3({ hosts: `http://127.0.0.1:${port}` });
    // As if an upgrade had moved the field (etcd3's watch client keeps its own reference).
    const priv = rpc as unknown as { pool: unknown };
    const pool = priv.pool;
    priv.pool = undefined;
    try {
      const got = nextStream();
      const { stream, path } = await openWatchStream(rpc);
      assert.equal(path, 'public');
      stream.write({ create_request: { key: Buffer.from('/x') } });
      await got;
      assert.deepEqual(seen.at(-1)!.get('hasleader'), []);
      stream.end();
    } finally {
      priv.pool = pool;
      rpc.close();
    }
  });
});
