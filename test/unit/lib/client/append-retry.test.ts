import { test } from 'node:test';
import assert from 'node:assert/strict';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { isRetryableAppendError, isRetryableQueuedAppendError } from '../../../../src/lib/client/appender.js';
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
