import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AppendFlowControl } from '../../../../src/core/broker/flow-control.js';

// Rates chosen so that the arithmetic is easy to follow: min 2,000 B/s (2 bytes per ms), max
// 20,000 B/s (20 bytes per ms).
const MIN = 2000;
const MAX = 20000;

function state(fc: AppendFlowControl) {
  return { balance: fc.balance, spent: fc.spent, charge: fc.charge };
}

test('flow control: the first RPC starts with one second of credit for both rates', () => {
  const fc = new AppendFlowControl();
  fc.reset(MAX, 0, MIN, 1_000_000);
  assert.equal(fc.maxRate, MAX);
  assert.equal(fc.minRate, MIN);
  assert.deepEqual(state(fc), { balance: MAX, spent: MIN, charge: 0 });
});

test('flow control: a chunk past the balance waits for credit, then a long idle period underflows', () => {
  const fc = new AppendFlowControl();
  fc.reset(MAX, 0, MIN, 1_000_000);
  fc.onChunk(MAX - 50); // passes
  assert.deepEqual(state(fc), { balance: 50, spent: MIN, charge: 0 });
  fc.onChunk(90); // 40 bytes must wait
  assert.deepEqual(state(fc), { balance: 0, spent: MIN, charge: 40 });
  assert.equal(fc.onTick(fc.lastMillis + 1), true); // 20 more bytes of credit
  assert.deepEqual(state(fc), { balance: 0, spent: MIN, charge: 20 });
  // A late tick: credit accrues before the minimum rate is charged, so no underflow although
  // a long time passed (the broker was the one holding the chunk back).
  assert.equal(fc.onTick(fc.lastMillis + 60_000), true);
  assert.deepEqual(state(fc), { balance: MAX * 10 - 20, spent: 20, charge: 0 });
  fc.onChunk(30);
  assert.deepEqual(state(fc), { balance: MAX * 10 - 50, spent: 50, charge: 0 });
  // 26 ms at 2 bytes per ms drains the 50 bytes spent: the client is too slow.
  assert.equal(fc.onTick(fc.lastMillis + 26), false);
  assert.equal(fc.spent, 0);
  assert.equal(fc.totalChunks, 3);
  assert.equal(fc.delayedChunks, 1);
});

test('flow control: one large chunk is released after as many seconds as it needs', () => {
  const fc = new AppendFlowControl();
  fc.reset(MIN, 0, MIN, 5_000);
  fc.onChunk(MIN * 6);
  for (let i = 0; i < 5; i++) {
    assert.deepEqual(state(fc), { balance: 0, spent: MIN, charge: MIN * (5 - i) });
    assert.equal(fc.onTick(fc.lastMillis + 1000), true);
  }
  assert.deepEqual(state(fc), { balance: 0, spent: MIN, charge: 0 });
  assert.equal(fc.delayedChunks, 1);
});

test('flow control: the balance carries over to the next RPC of the journal, with what the pause earned', () => {
  const fc = new AppendFlowControl();
  fc.reset(MAX, 0, MIN, 7_000);
  fc.onChunk(15_000);
  assert.equal(fc.onTick(fc.lastMillis + 100), true);
  assert.equal(fc.balance, 5_000 + 2_000);
  assert.equal(fc.spent, MIN - 200);
  fc.onChunk(6_000);
  assert.deepEqual(state(fc), { balance: 1_000, spent: MIN, charge: 0 });
  fc.reset(MAX, 0, MIN, fc.lastMillis + 200);
  assert.equal(fc.balance, 1_000 + 4_000);
  assert.equal(fc.spent, MIN, 'each RPC starts with a full second of minimum-rate credit');
  assert.equal(fc.totalChunks, 0);
});

test('flow control: a route change lifts the max rate for the rest of the RPC', () => {
  const before = new AppendFlowControl();
  before.reset(MAX, 0, MIN, 1_000);
  before.onInvalidate();
  before.onChunk(MAX * 5);
  assert.deepEqual(state(before), { balance: 0, spent: MIN, charge: 0 }, 'the balance is used first, the rest goes through uncharged');

  const waiting = new AppendFlowControl();
  waiting.reset(MAX, 0, MIN, 1_000);
  waiting.onChunk(MAX * 5);
  assert.equal(waiting.charge, MAX * 4);
  waiting.onInvalidate();
  assert.deepEqual(state(waiting), { balance: 0, spent: MIN, charge: 0 });
});

test('flow control: no max rate admits everything, but the minimum rate still applies', () => {
  const fc = new AppendFlowControl();
  fc.reset(0, 0, MIN, 1_000);
  assert.deepEqual(state(fc), { balance: 0, spent: MIN, charge: 0 });
  assert.equal(fc.onTick(fc.lastMillis + 250), true);
  assert.equal(fc.spent, MIN - 500);
  fc.onChunk(1_000_000);
  assert.deepEqual(state(fc), { balance: 0, spent: MIN, charge: 0 });
  assert.equal(fc.onTick(fc.lastMillis + 1000), false);
});

test('flow control: the broker flag lowers a journal rate but does not limit an unlimited journal', () => {
  const fc = new AppendFlowControl();
  fc.reset(MAX, MAX / 4, MIN, 1_000);
  assert.equal(fc.maxRate, MAX / 4);
  const higherFlag = new AppendFlowControl();
  higherFlag.reset(MAX, MAX * 4, MIN, 1_000);
  assert.equal(higherFlag.maxRate, MAX);
  const unlimited = new AppendFlowControl();
  unlimited.reset(0, MAX, MIN, 1_000);
  assert.equal(unlimited.maxRate, 0);
});

test('flow control: a clock that steps backwards changes nothing until it catches up', () => {
  const fc = new AppendFlowControl();
  fc.reset(MAX, 0, MIN, 10_000);
  fc.onChunk(MAX);
  assert.equal(fc.onTick(9_000), true);
  assert.deepEqual(state(fc), { balance: 0, spent: MIN, charge: 0 });
  assert.equal(fc.lastMillis, 10_000);
});
