import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ValidationError } from '../../../../src/lib/protocol/errors.js';
import type { JournalSpec } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import type { ShardSpec } from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import { label, labelSet } from '../../../../src/lib/protocol/labels.js';
import {
  formatLabelSelector,
  journalMatchLabels,
  matchesSelector,
  parseLabelSelector,
  rewritePrefixLabels,
  selectorMatchesJournal,
  selectorMatchesShard,
  shardMatchLabels,
} from '../../../../src/lib/protocol/selector.js';

describe('parseLabelSelector', () => {
  const examples: [string, string][] = [
    ['app=foo', 'app=foo'],
    ['app == foo', 'app=foo'],
    ['app==foo', 'app=foo'],
    ['app!=foo', 'app!=foo'],
    ['app != foo', 'app!=foo'],
    ['app in (a, b)', 'app in (a,b)'],
    ['app notin (a,b)', 'app notin (a,b)'],
    ['app not in (a)', 'app!=a'],
    ['app', 'app'],
    ['!app', '!app'],
    ['name:prefix=acme/', 'name:prefix=acme/'],
    ['prefix=acme/payments/', 'prefix=acme/payments/'],
    ['name in (acme/a, acme/b)', 'name in (acme/a,acme/b)'],
    ['id in (shard-001, shard-002)', 'id in (shard-001,shard-002)'],
    [
      'env in (prod, qa), tier!=batch, name:prefix=acme/events/, !legacy',
      'env in (prod,qa),name:prefix=acme/events/,!legacy,tier!=batch',
    ],
  ];
  for (const [text, canonical] of examples) {
    it(`parses ${JSON.stringify(text)} and prints it canonically`, () => {
      const sel = parseLabelSelector(text);
      assert.equal(formatLabelSelector(sel), canonical);
      // The canonical form parses back to the same selector.
      assert.deepEqual(parseLabelSelector(canonical), sel);
    });
  }

  it('builds sorted include and exclude sets', () => {
    const sel = parseLabelSelector('zz=1, aa in (y, x), !bb, cc notin (q,p)');
    assert.deepEqual(sel.include!.labels, [label('aa', 'x'), label('aa', 'y'), label('zz', '1')]);
    assert.deepEqual(sel.exclude!.labels, [label('bb'), label('cc', 'p'), label('cc', 'q')]);
  });

  it('marks :prefix labels and strips the suffix', () => {
    const sel = parseLabelSelector('name:prefix in (a/, b/), !tag:prefix');
    assert.deepEqual(sel.include!.labels, [label('name', 'a/', true), label('name', 'b/', true)]);
    assert.deepEqual(sel.exclude!.labels, [label('tag', '', true)]);
    assert.equal(formatLabelSelector(sel), 'name:prefix in (a/,b/),!tag:prefix');
  });

  it('accepts values with = and %, unicode letters, empty values and a trailing comma', () => {
    assert.deepEqual(parseLabelSelector('key=a=b%20').include!.labels, [label('key', 'a=b%20')]);
    assert.deepEqual(parseLabelSelector('clé=café').include!.labels, [label('clé', 'café')]);
    assert.deepEqual(parseLabelSelector('app=').include!.labels, [label('app', '')]);
    assert.deepEqual(parseLabelSelector('app=x,').include!.labels, [label('app', 'x')]);
    assert.deepEqual(parseLabelSelector(' app = x , b1 ').include!.labels, [label('app', 'x'), label('b1')]);
    assert.deepEqual(parseLabelSelector('app in ( )').include!.labels, [label('app', '')]);
  });

  it('parses the empty selector', () => {
    const sel = parseLabelSelector('');
    assert.deepEqual(sel, { include: { labels: [] }, exclude: { labels: [] } });
    assert.equal(formatLabelSelector(sel), '');
  });

  const malformed: [string, RegExp][] = [
    ['a=b', /label name .* at column 1/],
    ['=foo', /at column 1 \(found "="\)/],
    ['app  = foo', /expected an operator .* at column 5 \(found " "\)/],
    ['app=foo bar', /expected "," or end of input at column 9 \(found "b"\)/],
    ['app in (a', /expected "\)" at column 10 \(found end of input\)/],
    ['app in ()', /expected a list of values at column 9/],
    ['app in (a b)', /expected "," or "\)" in the value list at column 11/],
    ['app  in (a)', /at column 5/],
    ['app in  (a)', /expected "\(" at column 8/],
    [',app', /at column 1 \(found ","\)/],
    ['app=foo,,x=y', /at column 9 \(found ","\)/],
    ['!', /expected a label name .* at column 2 \(found end of input\)/],
    ['! app', /at column 2 \(found " "\)/],
    ['app:pre=x', /at column 4 \(found ":"\)/],
    ['app=foo;bar', /at column 8 \(found ";"\)/],
    ['app =* x', /at column 6 \(found "\*"\)/],
    ['app notin(a', /expected "\)" at column 12/],
    ['app not  in (a)', /expected "in" at column 9/],
    [' ', /at column 2/],
    ['app=a, app=a', /duplicate label "app"="a"/],
    ['app in (a,,b)', /"app" has both an empty and a non-empty value/],
    ['x'.repeat(65), /length 65 is out of range \(2 to 64 bytes\)/],
    [`app=${'v'.repeat(1025)}`, /length 1025 is out of range \(0 to 1024 bytes\)/],
  ];
  for (const [text, re] of malformed) {
    it(`rejects ${JSON.stringify(text.length > 40 ? text.slice(0, 40) + '…' : text)}`, () => {
      assert.throws(
        () => parseLabelSelector(text),
        (e: unknown) => {
          assert.ok(e instanceof ValidationError, 'a ValidationError');
          assert.ok(e.message.startsWith(`invalid selector ${JSON.stringify(text)}: `), e.message);
          assert.match(e.message, re);
          assert.ok(!e.message.includes('\n'), 'one line');
          return true;
        },
      );
    });
  }
});

describe('matchesSelector', () => {
  const set = labelSet(label('app', 'web'), label('env', 'prod'), label('tier', 'frontend'), label('path', 'acme/events/x'));
  const m = (s: string): boolean => matchesSelector(parseLabelSelector(s), set);

  it('matches everything with an empty selector', () => {
    assert.equal(m(''), true);
    assert.equal(matchesSelector(parseLabelSelector(''), labelSet()), true);
  });
  it('requires equal values for include labels', () => {
    assert.equal(m('app=web'), true);
    assert.equal(m('app=api'), false);
    assert.equal(m('missing=x'), false);
  });
  it('ORs values of one name and ANDs different names', () => {
    assert.equal(m('app in (api, web)'), true);
    assert.equal(m('app in (api, web), env=qa'), false);
    assert.equal(m('app in (api, web), env in (qa, prod)'), true);
  });
  it('treats an empty value as existence', () => {
    assert.equal(m('tier'), true);
    assert.equal(m('nope'), false);
    assert.equal(m('!nope'), true);
    assert.equal(m('!tier'), false);
  });
  it('rejects when any exclude label matches', () => {
    assert.equal(m('app!=api'), true);
    assert.equal(m('app!=web'), false);
    assert.equal(m('env notin (qa, dev)'), true);
    assert.equal(m('env notin (qa, prod)'), false);
    assert.equal(m('app=web, env!=prod'), false);
  });
  it('matches prefix labels by value prefix', () => {
    assert.equal(m('path:prefix=acme/'), true);
    assert.equal(m('path:prefix=acme/events/'), true);
    assert.equal(m('path:prefix=other/'), false);
    assert.equal(m('path=acme/'), false);
    assert.equal(m('path:prefix!=acme/'), false);
    assert.equal(m('!path:prefix'), false);
    assert.equal(m('!nothing:prefix'), true);
  });
});

describe('journal and shard matching', () => {
  const journal = {
    name: 'acme/payments/part-000',
    labels: labelSet(label('app', 'pay')),
  } as JournalSpec;
  const shard = { id: 'shard-001', labels: labelSet(label('app', 'count')) } as ShardSpec;

  it('adds the name and id meta-labels', () => {
    assert.deepEqual(journalMatchLabels(journal).labels, [label('app', 'pay'), label('name', 'acme/payments/part-000')]);
    assert.deepEqual(shardMatchLabels(shard).labels, [label('app', 'count'), label('id', 'shard-001')]);
  });
  it('rewrites prefix=... to a name prefix label', () => {
    const sel = rewritePrefixLabels(parseLabelSelector('prefix=acme/, app=pay'));
    assert.deepEqual(sel.include!.labels, [label('app', 'pay'), label('name', 'acme/', true)]);
    assert.throws(() => rewritePrefixLabels(parseLabelSelector('prefix=acme')), /"prefix" value "acme" must end in "\/"/);
  });
  it('matches journals by name, prefix and labels', () => {
    assert.equal(selectorMatchesJournal(parseLabelSelector('name=acme/payments/part-000'), journal), true);
    assert.equal(selectorMatchesJournal(parseLabelSelector('name=acme/payments'), journal), false);
    assert.equal(selectorMatchesJournal(parseLabelSelector('prefix=acme/payments/'), journal), true);
    assert.equal(selectorMatchesJournal(parseLabelSelector('prefix=acme/pay/'), journal), false);
    assert.equal(selectorMatchesJournal(parseLabelSelector('name:prefix=acme/pay'), journal), true);
    assert.equal(selectorMatchesJournal(parseLabelSelector('app=pay, prefix!=other/'), journal), true);
    assert.equal(selectorMatchesJournal(parseLabelSelector('app=pay, prefix!=acme/'), journal), false);
  });
  it('matches shards by id and labels', () => {
    assert.equal(selectorMatchesShard(parseLabelSelector('id in (shard-001, shard-002)'), shard), true);
    assert.equal(selectorMatchesShard(parseLabelSelector('id=shard-002'), shard), false);
    assert.equal(selectorMatchesShard(parseLabelSelector('app=count, id!=shard-002'), shard), true);
  });
});
