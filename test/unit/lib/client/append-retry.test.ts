import { test } from 'node:test';
import assert from 'node:assert/strict';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { appendMayHaveCommitted, isRetryableAppendError, isRetryableQueuedAppendError } from '../../../../src/lib/client/appender.js';
import { BrokerStatusError } from '../../../../src/lib/protocol/errors.js';
import { Status } from '../../../../src/lib/protocol/gen/broker/protocol.js';

function grpcError(code: number, details: string): Error {
  return Object.assign(new Error(`${code} ${details}`), { code, details });
}

test('queued appends retry a broker aborting a slow stream, unlike the simple appender', () => {
  const slow = grpcError(GrpcStatus.UNKNOWN, "client stream didn't sustain the minimum append data rate");
  assert.equal(isRetryableQueuedAppendError(slow), true);
  assert.equal(isRetryableAppendError(slow), false);
  assert.equal(isRetryableQueuedAppendError(grpcError(GrpcStatus.UNAVAILABLE, 'connection refused')), true);
  assert.equal(isRetryableQueuedAppendError(new BrokerStatusError(Status.NO_JOURNAL_PRIMARY_BROKER, 'append')), true);
});

test('queued appends give up on terminal statuses and cancellation', () => {
  for (const s of [
    Status.FRAGMENT_STORE_UNHEALTHY,
    Status.INDEX_HAS_GREATER_OFFSET,
    Status.JOURNAL_NOT_FOUND,
    Status.NOT_ALLOWED,
    Status.REGISTER_MISMATCH,
    Status.WRONG_APPEND_OFFSET,
  ]) {
    assert.equal(isRetryableQueuedAppendError(new BrokerStatusError(s, 'append')), false, Status[s]);
  }
  assert.equal(isRetryableQueuedAppendError(grpcError(GrpcStatus.CANCELLED, 'cancelled')), false);
  assert.equal(isRetryableQueuedAppendError(grpcError(GrpcStatus.UNAUTHENTICATED, 'bad token')), false);
});

test('an append is retried after its commit was sent only when the broker cannot have committed it', () => {
  // Before the commit message was sent, nothing can have committed.
  assert.equal(appendMayHaveCommitted(grpcError(GrpcStatus.UNAVAILABLE, 'Connection dropped'), false), false);
  // Definite answers: a refusing status, a Go handler error, a stream that never reached a primary.
  assert.equal(appendMayHaveCommitted(new BrokerStatusError(Status.NOT_JOURNAL_PRIMARY_BROKER, 'append'), true), false);
  assert.equal(appendMayHaveCommitted(grpcError(GrpcStatus.UNKNOWN, "client stream didn't sustain the minimum append data rate"), true), false);
  assert.equal(appendMayHaveCommitted(grpcError(GrpcStatus.UNAVAILABLE, 'all SubConns are in TransientFailure'), true), false);
  assert.equal(appendMayHaveCommitted(grpcError(GrpcStatus.UNAVAILABLE, 'No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1'), true), false);
  // Ambiguous: the connection broke after the commit was sent.
  assert.equal(appendMayHaveCommitted(grpcError(GrpcStatus.UNAVAILABLE, 'error reading from server: EOF'), true), true);
  assert.equal(appendMayHaveCommitted(grpcError(GrpcStatus.UNAVAILABLE, 'Connection dropped'), true), true);
  assert.equal(appendMayHaveCommitted(grpcError(GrpcStatus.INTERNAL, 'Received RST_STREAM with code 2'), true), true);
  assert.equal(appendMayHaveCommitted(grpcError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline exceeded'), true), true);
});
