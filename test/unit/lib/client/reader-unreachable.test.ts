// ReaderOptions.unreachableTimeoutMs: a read gives up once no broker could be reached for that
// long (gazctl's --timeout), and retries for ever without it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { JournalClient } from '../../../../src/lib/index.js';
import { TransportError } from '../../../../src/lib/protocol/errors.js';
import { startJournalStub } from '../../../../src/testing/stubs.js';
import { fastDelay } from './helpers.js';

test('a read that reaches no broker for unreachableTimeoutMs fails with one TransportError', async () => {
  const stub = await startJournalStub({ read: (call) => call.emit('error', { code: GrpcStatus.UNAVAILABLE, details: 'broker went away' }) });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  try {
    let retries = 0;
    const reader = client.read({ journal: 'a/j', offset: 0n, block: true }, { unreachableTimeoutMs: 200, onRetry: () => retries++ });
    await assert.rejects(reader.readAll(), (err: unknown) => {
      assert.ok(err instanceof TransportError, String(err));
      assert.match(err.message, /^reading a\/j: no broker could be reached for 200ms: UNAVAILABLE: broker went away$/);
      return true;
    });
    assert.ok(retries >= 1, 'retried before giving up');
  } finally {
    client.close();
    await stub.stop();
  }
});

test('without unreachableTimeoutMs the read keeps retrying until aborted', async () => {
  const stub = await startJournalStub({ read: (call) => call.emit('error', { code: GrpcStatus.UNAVAILABLE, details: 'broker went away' }) });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  try {
    const ac = new AbortController();
    let retries = 0;
    const reader = client.read({ journal: 'a/j', offset: 0n, block: true }, { signal: ac.signal, onRetry: () => ++retries >= 30 && ac.abort() });
    const got = await reader.readAll();
    assert.equal(got.length, 0);
    assert.ok(retries >= 30);
  } finally {
    client.close();
    await stub.stop();
  }
});
