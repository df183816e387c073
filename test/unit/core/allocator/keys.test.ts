// Unit tests of the allocator's key helpers (src/core/allocator/keys.ts).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  assignmentKey,
  compareStrings,
  itemAssignmentsPrefix,
  itemKey,
  KeyPartError,
  memberKey,
  parseKey,
} from '../../../../src/core/allocator/keys.js';

describe('allocator keys', () => {
  it('formats the three key kinds under the root', () => {
    assert.equal(itemKey('/gazette/cluster', 'a/journal'), '/gazette/cluster/items/a/journal');
    assert.equal(memberKey('/gazette/cluster', 'us-east-1', 'broker-1'), '/gazette/cluster/members/us-east-1#broker-1');
    assert.equal(itemAssignmentsPrefix('/r', 'j'), '/r/assign/j#');
    assert.equal(assignmentKey('/r', { itemId: 'a/j', zone: 'z', suffix: 's', slot: 12 }), '/r/assign/a/j#z#s#12');
  });

  it('refuses parts with characters at or below #, and bad slots', () => {
    assert.throws(() => itemKey('/r', 'a#b'), KeyPartError);
    assert.throws(() => memberKey('/r', 'zone a', 's'), KeyPartError);
    assert.throws(() => memberKey('/r', 'z', 'x!'), KeyPartError);
    assert.throws(() => assignmentKey('/r', { itemId: 'i', zone: 'z', suffix: 's', slot: -1 }), KeyPartError);
    assert.throws(() => assignmentKey('/r', { itemId: 'i', zone: 'z', suffix: 's', slot: 1.5 }), KeyPartError);
  });

  it('parses what it formats', () => {
    assert.deepEqual(parseKey('/r', itemKey('/r', 'x/y')), { kind: 'item', id: 'x/y' });
    assert.deepEqual(parseKey('/r', memberKey('/r', 'z', 's')), { kind: 'member', zone: 'z', suffix: 's' });
    assert.deepEqual(parseKey('/r', assignmentKey('/r', { itemId: 'i', zone: 'z', suffix: 's', slot: 3 })), {
      kind: 'assignment',
      itemId: 'i',
      zone: 'z',
      suffix: 's',
      slot: 3,
    });
  });

  it('explains keys that do not parse', () => {
    const bad: [string, RegExp][] = [
      ['/other/items/x', /not under the root/],
      ['/r/things/x', /unexpected key prefix/],
      ['/r/items/a#b', /expected <id>/],
      ['/r/members/zone', /expected <zone>#<suffix>/],
      ['/r/members/a#b#c', /expected <zone>#<suffix>/],
      ['/r/assign/i#z#s', /expected <item>#<zone>#<suffix>#<slot>/],
      ['/r/assign/i#z#s#x', /not a decimal integer/],
      ['/r/assign/i#z#s#-1', /not a decimal integer/],
      ['/r/assign/i##s#0', /empty part/],
      ['/r/members/z#a b', /below '#'/],
    ];
    for (const [key, why] of bad) {
      const got = parseKey('/r', key);
      assert.equal(typeof got, 'string', key);
      assert.match(got as string, why, key);
    }
  });

  it('orders strings as etcd orders their UTF-8 bytes', () => {
    const words = ['a', 'a#b', 'a-b', 'ab', 'b', '\uffff', '\u{1f600}', '\ue000', 'z', '', 'a\u{10000}', 'a\uffee'];
    const byBytes = [...words].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    assert.deepEqual([...words].sort(compareStrings), byBytes);
    assert.equal(compareStrings('x', 'x'), 0);
  });

  it('member and assignment key order agrees with (zone, suffix) order', () => {
    const pairs = [
      ['a', 'x'],
      ['a-b', 'a'],
      ['a', 'x-y'],
      ['ab', 'a'],
      ['a', 'xa'],
    ];
    const byKey = pairs.map(([z, s]) => memberKey('/r', z!, s!)).sort(compareStrings);
    const byTuple = [...pairs]
      .sort((p, q) => compareStrings(p[0]!, q[0]!) || compareStrings(p[1]!, q[1]!))
      .map(([z, s]) => memberKey('/r', z!, s!));
    assert.deepEqual(byKey, byTuple);
  });
});
