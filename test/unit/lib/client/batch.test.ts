import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { batchChanges, batchCount, ETCD_DEFAULT_MAX_TXN_OPS } from '../../../../src/lib/client/batch.js';
import { ValidationError } from '../../../../src/lib/protocol/errors.js';

describe('batchChanges', () => {
  const xs = [1, 2, 3, 4, 5, 6, 7];
  it('keeps everything in one batch for 0', () => {
    assert.deepEqual(batchChanges(xs, 0), [xs]);
  });
  it('cuts into consecutive chunks of at most N', () => {
    assert.deepEqual(batchChanges(xs, 3), [[1, 2, 3], [4, 5, 6], [7]]);
    assert.deepEqual(batchChanges(xs, 7), [xs]);
    assert.deepEqual(batchChanges(xs, 100), [xs]);
    assert.deepEqual(batchChanges(xs, 1).length, 7);
  });
  it('sends an empty change list as one empty batch', () => {
    assert.deepEqual(batchChanges([], 0), [[]]);
    assert.deepEqual(batchChanges([], 5), [[]]);
  });
  it('rejects negative and fractional sizes naming the option', () => {
    assert.throws(() => batchChanges(xs, -1), (e: unknown) => e instanceof ValidationError && /^maxTxnSize: /.test(e.message));
    assert.throws(() => batchChanges(xs, 1.5), ValidationError);
  });
  it('counts the batches it would cut', () => {
    for (const [n, size] of [[7, 0], [7, 3], [7, 7], [7, 100], [7, 1], [0, 0], [0, 5], [300, 100], [301, 100]] as const) {
      assert.equal(batchCount(n, size), batchChanges(Array.from({ length: n }, (_, i) => i), size).length, `${n} by ${size}`);
    }
    assert.throws(() => batchCount(3, -1), (e: unknown) => e instanceof ValidationError && /^maxTxnSize: /.test(e.message));
  });
  it('exposes the etcd default op limit', () => {
    assert.equal(ETCD_DEFAULT_MAX_TXN_OPS, 128);
  });
});
