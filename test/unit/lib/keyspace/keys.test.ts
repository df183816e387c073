import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  DEFAULT_BROKER_ROOT,
  KeyFormatError,
  assignmentKey,
  assignmentsPrefix,
  itemKey,
  memberKey,
  parseAssignmentKey,
  parseItemKey,
  parseMemberKey,
  prefixRangeEnd,
  routeFromAssignments,
} from '../../../../src/lib/keyspace/index.js';

const R = DEFAULT_BROKER_ROOT;

describe('keyspace key formats', () => {
  it('formats item, member and assignment keys', () => {
    assert.equal(R, '/gazette/cluster');
    assert.equal(itemKey(R, 'a/b'), '/gazette/cluster/items/a/b');
    assert.equal(memberKey(R, { zone: 'us-east', suffix: 'broker-1' }), '/gazette/cluster/members/us-east#broker-1');
    assert.equal(assignmentsPrefix(R, 'a/b'), '/gazette/cluster/assign/a/b#');
    assert.equal(
      assignmentKey(R, { item: 'a/b', zone: 'us-east', suffix: 'broker-1', slot: 2 }),
      '/gazette/cluster/assign/a/b#us-east#broker-1#2',
    );
    assert.equal(memberKey('/root', { zone: 'z', suffix: 's' }), '/root/members/z#s');
  });

  it('round-trips keys through the parsers', () => {
    assert.equal(parseItemKey(R, itemKey(R, 'x/y/z')), 'x/y/z');
    assert.deepEqual(parseMemberKey(R, memberKey(R, { zone: 'local', suffix: 'b-0' })), { zone: 'local', suffix: 'b-0' });
    const a = { item: 'logs/part-000', zone: 'local', suffix: 'broker-0', slot: 0 };
    assert.deepEqual(parseAssignmentKey(R, assignmentKey(R, a)), a);
  });

  it('accepts the slot grammar of Go strconv.Atoi', () => {
    assert.equal(parseAssignmentKey(R, `${R}/assign/j#z#s#+3`).slot, 3);
    assert.equal(parseAssignmentKey(R, `${R}/assign/j#z#s#-1`).slot, -1);
    assert.equal(parseAssignmentKey(R, `${R}/assign/j#z#s#007`).slot, 7);
  });

  it('rejects keys of the wrong shape, one clear error each', () => {
    const bad: [() => unknown, RegExp][] = [
      [() => parseMemberKey(R, '/other/members/z#s'), /is not under "\/gazette\/cluster\/members\/"/],
      [() => parseMemberKey(R, `${R}/members/zone-only`), /expected <zone>#<suffix>/],
      [() => parseMemberKey(R, `${R}/members/a#b#c`), /expected <zone>#<suffix>/],
      [() => parseAssignmentKey(R, `${R}/assign/j#z#s`), /expected <item>#<zone>#<suffix>#<slot>/],
      [() => parseAssignmentKey(R, `${R}/assign/j#z#s#1#2`), /expected <item>#<zone>#<suffix>#<slot>/],
      [() => parseAssignmentKey(R, `${R}/assign/j#z#s#one`), /slot "one" is not a decimal integer/],
      [() => parseAssignmentKey(R, `${R}/assign/j#z#s#1.5`), /not a decimal integer/],
      [() => parseAssignmentKey(R, `${R}/assign/j#z#s#`), /not a decimal integer/],
      [() => parseItemKey(R, `${R}/items/a#b`), /without '#'/],
    ];
    for (const [fn, re] of bad) assert.throws(fn, (e: unknown) => e instanceof KeyFormatError && re.test((e as Error).message));
  });

  it('refuses to format parts that would break key ordering', () => {
    assert.throws(() => memberKey(R, { zone: 'a#b', suffix: 's' }), /member zone "a#b" has a character at or below '#' at index 1/);
    assert.throws(() => memberKey(R, { zone: 'z', suffix: 'with space' }), /member suffix/);
    assert.throws(() => assignmentKey(R, { item: 'j!', zone: 'z', suffix: 's', slot: 0 }), /item id "j!"/);
    assert.throws(() => assignmentKey(R, { item: 'j', zone: 'z', suffix: 's', slot: 1.5 }), /slot 1.5 is not an integer/);
    assert.throws(() => itemKey(R, ''), /item id must not be empty/);
  });

  it('sorts encoded member keys by (zone, suffix)', () => {
    const ids = [
      { zone: 'a', suffix: 'z' },
      { zone: 'a-b', suffix: 'a' },
      { zone: 'a', suffix: 'y' },
      { zone: 'ab', suffix: 'a' },
    ];
    const byKey = [...ids].sort((x, y) => (memberKey(R, x) < memberKey(R, y) ? -1 : 1));
    const byTuple = [...ids].sort((x, y) => (x.zone === y.zone ? (x.suffix < y.suffix ? -1 : 1) : x.zone < y.zone ? -1 : 1));
    assert.deepEqual(byKey, byTuple);
  });
});

describe('routeFromAssignments', () => {
  it('keeps key order and takes the slot-0 member as primary', () => {
    const keys = [
      `${R}/assign/j#us-east#b-1#1`,
      `${R}/assign/j#us-east#b-2#0`,
      `${R}/assign/j#us-west#b-0#2`,
    ].map((k) => parseAssignmentKey(R, k));
    assert.deepEqual(routeFromAssignments(keys), {
      members: [
        { zone: 'us-east', suffix: 'b-1' },
        { zone: 'us-east', suffix: 'b-2' },
        { zone: 'us-west', suffix: 'b-0' },
      ],
      primary: 1,
      endpoints: [],
    });
  });

  it('has primary -1 without a slot 0, and an empty route for no assignments', () => {
    const keys = [parseAssignmentKey(R, `${R}/assign/j#z#a#1`), parseAssignmentKey(R, `${R}/assign/j#z#b#2`)];
    assert.equal(routeFromAssignments(keys).primary, -1);
    assert.deepEqual(routeFromAssignments([]), { members: [], primary: -1, endpoints: [] });
  });

  it('lets a later slot 0 win, as upstream does', () => {
    const keys = [parseAssignmentKey(R, `${R}/assign/j#z#a#0`), parseAssignmentKey(R, `${R}/assign/j#z#b#0`)];
    assert.equal(routeFromAssignments(keys).primary, 1);
  });
});

describe('prefixRangeEnd', () => {
  it('increments the last byte that can be incremented', () => {
    assert.deepEqual(prefixRangeEnd('/a/'), Buffer.from('/a0'));
    assert.deepEqual(prefixRangeEnd(Buffer.from([0x61, 0xff, 0xff])), Buffer.from([0x62]));
    assert.deepEqual(prefixRangeEnd(Buffer.from([0xff])), Buffer.from([0]));
    assert.deepEqual(prefixRangeEnd(''), Buffer.from([0]));
  });
});
