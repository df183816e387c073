import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ValidationError } from '../../../../src/lib/protocol/errors.js';
import {
  CONTENT_TYPE_RECOVERY_LOG,
  LABEL_CONTENT_TYPE,
  LABEL_MESSAGE_SUBTYPE,
  LABEL_MESSAGE_TYPE,
  LABEL_REGION,
  addLabelValue,
  checkMediaType,
  compareStrings,
  label,
  labelSet,
  labelValues,
  removeLabel,
  setLabelValue,
  validateLabelName,
  validateLabelSet,
  validateLabelValue,
  validateSingleValueLabels,
} from '../../../../src/lib/protocol/labels.js';

describe('label sets', () => {
  it('sorts by name then value and removes duplicates', () => {
    const s = labelSet(label('b', '2'), label('a', 'z'), label('b', '1'), label('a', 'z'), label('aa'));
    assert.deepEqual(s.labels, [label('a', 'z'), label('aa'), label('b', '1'), label('b', '2')]);
  });
  it('orders by UTF-8 bytes, like Go', () => {
    // U+FF21 (fullwidth A) sorts before U+1F600 in UTF-8, though not in UTF-16 units.
    assert.ok(compareStrings('\uFF21', '\u{1F600}') < 0);
    assert.ok(compareStrings('ab', 'b') < 0);
    assert.equal(compareStrings('x', 'x'), 0);
  });
  it('looks up, sets, adds and removes values', () => {
    const s = labelSet(label('app', 'a'), label('app', 'b'), label('env', 'prod'));
    assert.deepEqual(labelValues(s, 'app'), ['a', 'b']);
    assert.deepEqual(labelValues(s, 'none'), []);
    assert.deepEqual(labelValues(undefined, 'app'), []);
    assert.deepEqual(setLabelValue(s, 'app', 'c').labels, [label('app', 'c'), label('env', 'prod')]);
    assert.deepEqual(addLabelValue(s, 'env', 'qa').labels.map((l) => l.value), ['a', 'b', 'prod', 'qa']);
    assert.deepEqual(removeLabel(s, 'app').labels, [label('env', 'prod')]);
  });
});

describe('label validation', () => {
  it('accepts good names and values', () => {
    validateLabelName('ab');
    validateLabelName('app.gazette.dev/message-type');
    validateLabelName('ünïcode_名前+1');
    validateLabelName('x'.repeat(64));
    validateLabelValue('');
    validateLabelValue('a=b%20c/d.e-f_g+h');
    validateLabelValue('v'.repeat(1024));
  });
  it('rejects bad names and values with a clear message', () => {
    assert.throws(() => validateLabelName('a'), /^ValidationError: label name "a": length 1 is out of range \(2 to 64 bytes\)$/);
    assert.throws(() => validateLabelName('x'.repeat(65)), /length 65 is out of range/);
    // Length counts UTF-8 bytes: 33 two-byte letters are 66 bytes.
    assert.throws(() => validateLabelName('é'.repeat(33)), /length 66 is out of range/);
    assert.throws(() => validateLabelName('a=b'), /label name "a=b": invalid character "=" at position 2/);
    assert.throws(() => validateLabelName('a b'), /invalid character " "/);
    assert.throws(() => validateLabelValue('a;b'), /label value "a;b": invalid character ";"/);
    assert.throws(() => validateLabelValue('v'.repeat(1025)), /length 1025 is out of range \(0 to 1024 bytes\)/);
    assert.throws(() => validateLabelValue('a#b'), ValidationError);
  });
  it('validates set order, uniqueness and empty/non-empty mixes', () => {
    validateLabelSet({ labels: [label('aa', '1'), label('aa', '2'), label('bb')] });
    validateLabelSet(undefined);
    assert.throws(
      () => validateLabelSet({ labels: [label('bb'), label('aa')] }),
      /labels\[1\]: labels are not sorted: "aa" comes after "bb"/,
    );
    assert.throws(
      () => validateLabelSet({ labels: [label('aa', '2'), label('aa', '1')] }),
      /labels\[1\]: labels are not sorted/,
    );
    assert.throws(() => validateLabelSet({ labels: [label('aa', '1'), label('aa', '1')] }), /duplicate label "aa"="1"/);
    assert.throws(
      () => validateLabelSet({ labels: [label('aa', ''), label('aa', '1')] }),
      /"aa" has both an empty and a non-empty value/,
    );
    assert.throws(() => validateLabelSet({ labels: [label('aa', 'x', true)] }), /prefix=true, which is only allowed in selectors/);
    validateLabelSet({ labels: [label('aa', 'x', true)] }, { allowPrefix: true });
    assert.throws(() => validateLabelSet({ labels: [label('ok'), label('b@d')] }), /labels\[1\]: name "b@d": invalid character "@"/);
  });
  it('checks single-value labels and content/message type rules', () => {
    validateSingleValueLabels(labelSet(label(LABEL_CONTENT_TYPE, CONTENT_TYPE_RECOVERY_LOG), label('tag', 'a'), label('tag', 'b')));
    validateSingleValueLabels(
      labelSet(label(LABEL_CONTENT_TYPE, 'application/x-ndjson'), label(LABEL_MESSAGE_TYPE, 'Foo'), label(LABEL_MESSAGE_SUBTYPE, 'Bar')),
    );
    assert.throws(
      () => validateSingleValueLabels(labelSet(label(LABEL_REGION, 'us-east-1'), label(LABEL_REGION, 'us-west-2'))),
      /"app.gazette.dev\/region" may have only one value \(found "us-east-1" and "us-west-2"\)/,
    );
    assert.throws(() => validateSingleValueLabels(labelSet(label(LABEL_CONTENT_TYPE, 'a/b/c'))), /"a\/b\/c" is not a MIME type/);
    assert.throws(() => validateSingleValueLabels(labelSet(label(LABEL_CONTENT_TYPE, ''))), /no media type/);
    assert.throws(
      () => validateSingleValueLabels(labelSet(label(LABEL_MESSAGE_TYPE, 'Foo'))),
      /"app.gazette.dev\/message-type" requires a "content-type" label/,
    );
    assert.throws(
      () => validateSingleValueLabels(labelSet(label(LABEL_CONTENT_TYPE, 'text/csv'), label(LABEL_MESSAGE_SUBTYPE, 'Bar'))),
      /"app.gazette.dev\/message-subtype" requires a "app.gazette.dev\/message-type" label/,
    );
  });
  it('parses media types as Go mime does', () => {
    assert.equal(checkMediaType('text/csv'), undefined);
    assert.equal(checkMediaType('text'), undefined);
    assert.equal(checkMediaType('application/x-protobuf-fixed'), undefined);
    assert.equal(checkMediaType('text/'), 'expected token after slash');
    assert.equal(checkMediaType('a=b'), 'expected slash after first token');
    assert.equal(checkMediaType('/x'), 'no media type');
  });
});
