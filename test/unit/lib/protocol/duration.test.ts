import assert from 'node:assert/strict';
import { it } from 'node:test';

import { formatGoDuration, parseGoDuration } from '../../../../src/lib/protocol/duration.js';

it('parses both micro signs (U+00B5 and U+03BC) and the ASCII spelling of microseconds', () => {
  assert.equal(parseGoDuration('1\u00b5s'), 1000n);
  assert.equal(parseGoDuration('1\u03bcs'), 1000n);
  assert.equal(parseGoDuration('1us'), 1000n);
  assert.equal(parseGoDuration('1.5\u00b5s2ns'), 1502n);
  assert.equal(formatGoDuration(1500n), '1.5\u00b5s');
  assert.throws(() => parseGoDuration('1\u00b6s'), /invalid duration/);
});
