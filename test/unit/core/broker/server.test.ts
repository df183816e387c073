// The broker's service port: gRPC and HTTP/1 on one socket, told apart by the first bytes, which
// are put back before the socket goes to HTTP/2 or HTTP/1; Read responses may be encoded already.
import assert from 'node:assert/strict';
import { get } from 'node:http';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { credentials, Metadata, status as GrpcStatus, type ServerWritableStream } from '@grpc/grpc-js';

import { Metrics } from '../../../../src/core/broker/metrics.js';
import { encodeContent } from '../../../../src/core/broker/read-wire.js';
import { startServer, type ServiceServer } from '../../../../src/core/broker/server.js';
import { JournalClient, ReadRequest, ReadResponse, Status, type JournalServer } from '../../../../src/lib/protocol/gen/broker/protocol.js';

const unimplemented = (_call: unknown, cb: (e: unknown) => void) => cb(Object.assign(new Error('no'), { code: GrpcStatus.UNIMPLEMENTED, metadata: new Metadata() }));

const CONTENT = Buffer.from('hello, journal content '.repeat(2000));

const journal = {
  list: (call: ServerWritableStream<unknown, unknown>) => call.end(),
  apply: unimplemented,
  append: unimplemented,
  replicate: (call: ServerWritableStream<unknown, unknown>) => call.end(),
  listFragments: unimplemented,
  fragmentStoreHealth: unimplemented,
  read(call: ServerWritableStream<ReadRequest, ReadResponse>) {
    // A metadata response as an object, then the content as one already-encoded chunk.
    call.write(ReadResponse.fromPartial({ status: Status.OK, offset: call.request.offset, write_head: 1000n + BigInt(CONTENT.length) }));
    (call as unknown as ServerWritableStream<ReadRequest, Buffer>).write(encodeContent(call.request.offset, CONTENT));
    call.end();
  },
} as unknown as JournalServer;

let ready = false;
let server: ServiceServer;

function readAll(port: number): Promise<ReadResponse[]> {
  const client = new JournalClient(`127.0.0.1:${port}`, credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const out: ReadResponse[] = [];
    const call = client.read(ReadRequest.fromPartial({ journal: 'a/b', offset: 1000n }));
    call.on('data', (r: ReadResponse) => out.push(r));
    call.on('error', (e) => {
      client.close();
      reject(e);
    });
    call.on('end', () => {
      client.close();
      resolve(out);
    });
  });
}

function checkRead(got: ReadResponse[]): void {
  assert.equal(got.length, 2);
  assert.equal(got[0]!.status, Status.OK);
  assert.equal(got[0]!.write_head, 1000n + BigInt(CONTENT.length));
  assert.equal(got[1]!.offset, 1000n);
  assert.deepEqual(Buffer.from(got[1]!.content), CONTENT);
}

function httpGet(port: number, path: string): Promise<{ code: number; body: string }> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
}

/** A TCP relay to `port` that passes the client's first `slow` bytes on one at a time. */
async function slowStartRelay(port: number, slow: number): Promise<Server> {
  const relay = createServer((client: Socket) => {
    const up = connect(port, '127.0.0.1');
    up.setNoDelay(true);
    let passed = 0;
    let queue = Promise.resolve();
    client.on('data', (d: Buffer) => {
      client.pause();
      queue = queue.then(async () => {
        for (let i = 0; i < d.length; ) {
          if (passed < slow) {
            up.write(d.subarray(i, i + 1));
            passed++;
            i++;
            await new Promise((r) => setTimeout(r, 2));
          } else {
            up.write(d.subarray(i));
            break;
          }
        }
        client.resume();
      });
    });
    up.on('data', (d: Buffer) => client.write(d));
    up.on('end', () => client.end());
    client.on('end', () => void queue.then(() => up.end()));
    up.on('error', () => client.destroy());
    client.on('error', () => up.destroy());
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', () => r()));
  return relay;
}

describe('broker service port', () => {
  before(async () => {
    server = await startServer({ host: '127.0.0.1', port: 0, journal, metrics: new Metrics(), ready: () => ready, maxRecvBytes: 4 << 20 });
  });
  after(async () => {
    await server.close();
  });

  it('serves gRPC on the socket it read the first bytes from, with encoded chunks passed through', async () => {
    checkRead(await readAll(server.port));
  });

  it('serves gRPC when the connection preface arrives a byte at a time', async () => {
    const relay = await slowStartRelay(server.port, 40);
    try {
      checkRead(await readAll((relay.address() as AddressInfo).port));
    } finally {
      relay.close();
    }
  });

  it('serves HTTP/1 readiness and metrics on the same port', async () => {
    ready = false;
    assert.deepEqual(await httpGet(server.port, '/debug/ready'), { code: 503, body: 'not ready\n' });
    ready = true;
    assert.deepEqual(await httpGet(server.port, '/debug/ready'), { code: 200, body: 'ready\n' });
    const m = await httpGet(server.port, '/metrics');
    assert.equal(m.code, 200);
    assert.match(m.body, /gazette_read_bytes_total/);
    assert.equal((await httpGet(server.port, '/nope')).code, 404);
  });

  it('serves HTTP/1 when the request line arrives a byte at a time', async () => {
    ready = true;
    const relay = await slowStartRelay(server.port, 20);
    try {
      assert.deepEqual(await httpGet((relay.address() as AddressInfo).port, '/debug/ready'), { code: 200, body: 'ready\n' });
    } finally {
      relay.close();
    }
  });
});
