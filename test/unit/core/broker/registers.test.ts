import assert from 'node:assert/strict';
import { test } from 'node:test';

import { applyRegisters } from '../../../../src/core/broker/append.js';

test('registers: subtract removes a name whose values match, then the union adds, its values winning per name', () => {
  const l = (name: string, value: string) => ({ name, value, prefix: false });
  const cur = { labels: [l('b', '1'), l('c', '3')] };
  const out = applyRegisters(cur, { labels: [l('a', '2'), l('c', '9')] }, undefined);
  assert.deepEqual(out.labels.map((x) => `${x.name}=${x.value}`), ['a=2', 'b=1', 'c=9']);
  const sub = applyRegisters(out, undefined, { labels: [l('b', '1'), l('c', '3')] });
  assert.deepEqual(sub.labels.map((x) => `${x.name}=${x.value}`), ['a=2', 'c=9'], 'c=3 does not match c=9, so c stays');
  const both = applyRegisters(cur, { labels: [l('b', '5')] }, { labels: [l('b', '1')] });
  assert.deepEqual(both.labels.map((x) => `${x.name}=${x.value}`), ['b=5', 'c=3']);
});
