import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { credentials, status as GrpcStatus, type ServerDuplexStream, type ServiceError } from '@grpc/grpc-js';

import { startServer, type ServiceServer } from '../../../../src/core/broker/server.js';
import { Metrics } from '../../../../src/core/broker/metrics.js';
import { ReplicateCallError, ReplicateSessions, contentFrame, type ReplicateCall } from '../../../../src/core/broker/replicate-client.js';
import { decodeGrpcMessage, encodeGrpcMessage, frameMessage } from '../../../../src/lib/protocol/grpc-frame.js';
import { encodeReplicateContent, encodeReplicateRequest } from '../../../../src/core/broker/codec.js';
import { JournalClient, ListRequest, ReplicateRequest, ReplicateResponse, Status, type JournalServer } from '../../../../src/lib/protocol/gen/broker/protocol.js';

type Call = ServerDuplexStream<ReplicateRequest, ReplicateResponse>;

/** What a replica saw of one stream, and how it ended it. */
interface Seen {
  requests: ReplicateRequest[];
}

describe('Replicate over HTTP/2 without grpc-js (replicate-client.ts, replicate-server.ts)', () => {
  let server: ServiceServer;
  let behave: (call: Call, seen: Seen) => void | Promise<void>;
  const seen: Seen[] = [];
  const sessions = new ReplicateSessions();

  before(async () => {
    const journal = {
      replicate(call: Call) {
        const s: Seen = { requests: [] };
        seen.push(s);
        void behave(call, s);
      },
    } as unknown as JournalServer;
    server = await startServer({ host: '127.0.0.1', port: 0, journal, metrics: new Metrics(), ready: () => true, maxRecvBytes: 1 << 22 });
  });
  after(async () => {
    sessions.close();
    await server.close();
  });

  /** Opens a stream; resolves with its responses once it ends (with the error it ended with). */
  function open(): { call: ReplicateCall; done: Promise<{ responses: ReplicateResponse[]; err: Error | undefined }> } {
    const responses: ReplicateResponse[] = [];
    let call!: ReplicateCall;
    const done = new Promise<{ responses: ReplicateResponse[]; err: Error | undefined }>((resolve) => {
      call = sessions.open(`http://127.0.0.1:${server.port}`, {
        onResponse: (r) => responses.push(r),
        onEnd: (err) => resolve({ responses, err }),
      });
    });
    return { call, done };
  }

  it('sends content messages as {content, content_delta}, whole, and reads every answer', async () => {
    behave = async (call, s) => {
      for await (const r of call as AsyncIterable<ReplicateRequest>) {
        s.requests.push(r);
        if (r.acknowledge) call.write(ReplicateResponse.fromPartial({ status: Status.OK }));
      }
      call.end();
    };
    const { call, done } = open();
    const first = ReplicateRequest.fromPartial({ proposal: { journal: 'a/b', begin: 0n, end: 0n }, acknowledge: true });
    call.write(frameMessage(encodeReplicateRequest(first)));
    const big = Buffer.alloc(200_000, 'x');
    big.write('start', 0);
    const small = Buffer.from('hello');
    call.write(...contentFrame(big, 0));
    call.write(...contentFrame(small, big.length));
    call.write(frameMessage(encodeReplicateRequest(ReplicateRequest.fromPartial({ proposal: { journal: 'a/b', begin: 0n, end: 5n }, acknowledge: true }))));
    call.end();
    const { responses, err } = await done;
    assert.equal(err, undefined, 'the replica ended the call with OK');
    assert.deepEqual(
      responses.map((r) => r.status),
      [Status.OK, Status.OK],
    );
    const got = seen.at(-1)!.requests;
    assert.equal(got.length, 4);
    assert.equal(got[0]!.proposal?.journal, 'a/b');
    assert.ok(Buffer.from(got[1]!.content).equals(big));
    assert.equal(got[1]!.content_delta, 0n);
    assert.ok(Buffer.from(got[2]!.content).equals(small));
    assert.equal(got[2]!.content_delta, BigInt(big.length));
    assert.equal(got[3]!.proposal?.end, 5n);
  });

  it('frames a content message as the generated encoder writes it, the content not copied', () => {
    for (const len of [1, 127, 128, 70_000]) {
      const content = Buffer.alloc(len, 'c');
      for (const delta of [0, 1, 300, 2 ** 40]) {
        const parts = contentFrame(content, delta);
        assert.equal(parts[1], content, 'the content goes out as it is');
        const wire = Buffer.concat(parts);
        assert.equal(wire[0], 0, 'not compressed');
        assert.equal(wire.readUInt32BE(1), wire.length - 5);
        assert.deepEqual(wire.subarray(5), encodeReplicateContent(content, delta), `len ${len} delta ${delta}`);
        assert.deepEqual(ReplicateRequest.decode(wire.subarray(5)), ReplicateRequest.fromPartial({ content, content_delta: BigInt(delta) }));
      }
    }
    assert.throws(() => contentFrame(Buffer.alloc(1), -1), RangeError);
  });

  it('reports a status the replica ended the call with, code and message', async () => {
    behave = async (call) => {
      await call[Symbol.asyncIterator]().next();
      call.write(ReplicateResponse.fromPartial({ status: Status.OK }));
      call.emit('error', Object.assign(new Error('replicate a/b: 50% done, then: nope'), { code: GrpcStatus.FAILED_PRECONDITION, details: 'replicate a/b: 50% done, then: nope' }));
    };
    const { call, done } = open();
    call.write(frameMessage(encodeReplicateRequest(ReplicateRequest.fromPartial({ proposal: { journal: 'a/b' }, acknowledge: true }))));
    const { responses, err } = await done;
    assert.equal(responses.length, 1);
    assert.ok(err instanceof ReplicateCallError);
    assert.equal(err.code, GrpcStatus.FAILED_PRECONDITION);
    assert.equal(err.details, 'replicate a/b: 50% done, then: nope');
    assert.match(err.message, /^9 FAILED_PRECONDITION: /);
  });

  it('reports a call answered with a status alone (no message before it)', async () => {
    behave = async (call) => {
      await call[Symbol.asyncIterator]().next();
      call.emit('error', Object.assign(new Error('bad'), { code: GrpcStatus.INVALID_ARGUMENT, details: 'bad first message' }));
    };
    const { call, done } = open();
    call.write(frameMessage(encodeReplicateRequest({ acknowledge: true })));
    const { responses, err } = await done;
    assert.equal(responses.length, 0);
    assert.ok(err instanceof ReplicateCallError);
    assert.equal(err.code, GrpcStatus.INVALID_ARGUMENT);
    assert.equal(err.details, 'bad first message');
  });

  it('fails the call of an endpoint nobody listens on, and a cancelled call ends', async () => {
    const dead = new ReplicateSessions();
    try {
      const err = await new Promise<Error | undefined>((resolve) => {
        const c = dead.open('http://127.0.0.1:1', { onResponse: () => undefined, onEnd: resolve });
        c.write(frameMessage(encodeReplicateRequest({ acknowledge: true })));
      });
      assert.ok(err, 'the call failed');
    } finally {
      dead.close();
    }
    behave = () => undefined; // never answers
    const { call, done } = open();
    call.write(frameMessage(encodeReplicateRequest({ acknowledge: true })));
    call.cancel();
    const { err } = await done;
    assert.ok(err instanceof ReplicateCallError);
    assert.equal(err.code, GrpcStatus.UNAVAILABLE);
  });

  it('serves a stock gRPC client (grpc-js): messages, answers, and a status message with any characters', async () => {
    const client = new JournalClient(`127.0.0.1:${server.port}`, credentials.createInsecure());
    try {
      const details = 'route changed: 100% ünïcode\nline';
      behave = async (call, s) => {
        for await (const r of call as AsyncIterable<ReplicateRequest>) {
          s.requests.push(r);
          if (r.acknowledge) call.write(ReplicateResponse.fromPartial({ status: Status.PROPOSAL_MISMATCH, fragment: { journal: 'a/b', end: 7n } }));
        }
        call.emit('error', { code: GrpcStatus.FAILED_PRECONDITION, details });
      };
      const got: ReplicateResponse[] = [];
      const err = await new Promise<ServiceError>((resolve, reject) => {
        const call = client.replicate();
        call.on('data', (r: ReplicateResponse) => got.push(r));
        call.on('error', resolve);
        call.on('end', () => reject(new Error('ended without the status')));
        call.write(ReplicateRequest.fromPartial({ content: Buffer.alloc(100_000, 'z'), content_delta: 3n }));
        call.write(ReplicateRequest.fromPartial({ proposal: { journal: 'a/b' }, acknowledge: true }));
        call.end();
      });
      assert.equal(err.code, GrpcStatus.FAILED_PRECONDITION);
      assert.equal(err.details, details);
      assert.equal(got.length, 1);
      assert.equal(got[0]!.status, Status.PROPOSAL_MISMATCH);
      assert.equal(got[0]!.fragment?.end, 7n);
      const reqs = seen.at(-1)!.requests;
      assert.equal(reqs.length, 2);
      assert.equal(reqs[0]!.content.length, 100_000);
      assert.equal(reqs[0]!.content_delta, 3n);
      // Other methods still reach grpc-js (this server implements none of them).
      const listErr = await new Promise<ServiceError | null>((resolve) => {
        const l = client.list(ListRequest.fromPartial({}));
        l.on('error', resolve);
        l.on('end', () => resolve(null));
        l.on('data', () => undefined);
      });
      assert.equal(listErr?.code, GrpcStatus.UNIMPLEMENTED);
    } finally {
      client.close();
    }
  });

  it('percent-encodes a status message as gRPC does', () => {
    assert.equal(encodeGrpcMessage('plain text: ok'), 'plain text: ok');
    assert.equal(encodeGrpcMessage('50%'), '50%25');
    assert.equal(encodeGrpcMessage('ü\n'), '%C3%BC%0A');
  });

  it('decodes a status message as grpc-js does, keeping one that is not valid percent-encoding', () => {
    for (const s of ['plain text: ok', '50%', 'ü\n', 'a/b:c']) assert.equal(decodeGrpcMessage(encodeGrpcMessage(s)), s);
    assert.equal(decodeGrpcMessage('100%zz'), '100%zz');
  });
});
