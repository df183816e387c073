// The time flags (--from, --to): unix seconds, RFC 3339 times and durations ago, one parser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OptionValueError, parseTimeText, resolveOptions, timeOption, options } from '../../../src/cli/options.js';
import { UsageError } from '../../../src/cli/exit.js';

const NOW = Date.UTC(2024, 4, 2, 12, 0, 0, 500); // 2024-05-02T12:00:00.5Z

test('unix seconds are taken as they are', () => {
  assert.equal(parseTimeText('0', NOW), 0);
  assert.equal(parseTimeText('1700000000', NOW), 1_700_000_000);
  assert.equal(parseTimeText(' 42 ', NOW), 42);
});

test('RFC 3339 times, with a zone, fractions rounded down', () => {
  assert.equal(parseTimeText('2024-05-01T00:00:00Z', NOW), Date.UTC(2024, 4, 1) / 1000);
  assert.equal(parseTimeText('2024-05-01t00:00:00.999z', NOW), Date.UTC(2024, 4, 1) / 1000);
  assert.equal(parseTimeText('2024-05-01T02:00:00+02:00', NOW), Date.UTC(2024, 4, 1) / 1000);
  assert.equal(parseTimeText('2024-05-01 02:00:00+02:00', NOW), Date.UTC(2024, 4, 1) / 1000);
});

test('Go durations are that long before now', () => {
  assert.equal(parseTimeText('24h', NOW), Date.UTC(2024, 4, 1, 12) / 1000);
  assert.equal(parseTimeText('1h30m', NOW), Date.UTC(2024, 4, 2, 10, 30) / 1000);
  assert.equal(parseTimeText('0s', NOW), Date.UTC(2024, 4, 2, 12) / 1000);
});

test('bad values are refused with the reason', () => {
  const cases: [string, RegExp][] = [
    ['yesterday', /expected unix seconds, an RFC 3339 time or a duration ago such as 24h, got "yesterday"/],
    ['-5', /expected unix seconds >= 0, got -5/],
    ['-24h', /must not be negative, got "-24h"/],
    ['2024-05-01', /got "2024-05-01"/], // a date without a time is not RFC 3339
    ['2024-05-01T00:00:00', /got "2024-05-01T00:00:00"/], // nor a time without a zone
    ['2024-13-01T00:00:00Z', /invalid RFC 3339 time/],
    ['1969-12-31T23:59:59Z', /before 1970/],
    ['99999999999999999999', /out of range/],
    ['1000000h', /before 1970/],
  ];
  for (const [text, re] of cases) assert.throws(() => parseTimeText(text, NOW), (e: unknown) => e instanceof OptionValueError && re.test(e.message), text);
});

test('a bad time flag is a usage error naming the flag', () => {
  const set = options({ to: timeOption({ description: 'x', ini: { field: 'ToUnix' } }) });
  const resolve = (v: string) => resolveOptions(set, { argv: { to: v }, given: new Set(['to']), env: {}, group: 'journals', section: 'journals.read' });
  assert.equal(resolve('1700000000').to, 1_700_000_000);
  assert.throws(() => resolve('soon'), (e: unknown) => e instanceof UsageError && /^--to: .*"soon"/.test(e.message));
  assert.equal(resolveOptions(set, { argv: {}, given: new Set(), env: {}, group: 'journals', section: 'journals.read' }).to, 0, 'unset is 0');
});
