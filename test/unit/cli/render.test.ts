// Unit tests of src/cli/render.ts: header titles, box tables and humanized sizes and times.
//
// Every expected value below was produced by the libraries upstream gazctl v0.103.0 links
// (olekukonko/tablewriter v1.1.0 with gazctl's defaults: NewWriter, Header, Append, Render; and
// dustin/go-humanize v1.0.1: IBytes, RelTime(then, now, "ago", "from now")), run on these inputs.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { headerTitle, humanizeBytes, humanizeTime, renderTable } from '../../../src/cli/render.js';

describe('headerTitle (tablewriter header auto-format)', () => {
  // The column titles gazctl itself uses.
  const fixed: [string, string][] = [
    ['Name', 'NAME'],
    ['RF', 'RF'],
    ['Primary', 'PRIMARY'],
    ['Replicas', 'REPLICAS'],
    ['Stores', 'STORES'],
    ['Journal', 'JOURNAL'],
    ['Offset', 'OFFSET'],
    ['Length', 'LENGTH'],
    ['Persisted', 'PERSISTED'],
    ['SHA1', 'SHA 1'],
    ['Compression', 'COMPRESSION'],
    ['URL', 'URL'],
  ];
  for (const [input, want] of fixed) {
    it(`${JSON.stringify(input)} → ${JSON.stringify(want)}`, () => assert.equal(headerTitle(input), want));
  }

  // Label columns (-L) take any label name: tablewriter first splits the title into runs of one
  // character class (lower, upper, digit, other), joins them with spaces, then replaces "_" and
  // word-adjacent "." with spaces and upper-cases.
  const labels: [string, string][] = [
    ['region', 'REGION'],
    ['tier', 'TIER'],
    ['eu_west', 'EU WEST'],
    ['_x_', 'X'],
    ['content-type', 'CONTENT - TYPE'],
    ['app.gazette.dev/message-type', 'APP . GAZETTE . DEV / MESSAGE - TYPE'],
    ['a.b_c', 'A . B C'],
    ['a--b', 'A -- B'],
    ['foo.', 'FOO .'],
    ['1.5', '1 . 5'],
    ['v1.2', 'V 1 . 2'],
    ['x2y', 'X 2 Y'],
    ['camelCase', 'CAMEL CASE'],
    ['HTTPServer', 'HTTP SERVER'],
  ];
  for (const [input, want] of labels) {
    it(`label column ${JSON.stringify(input)} → ${JSON.stringify(want)}`, () => assert.equal(headerTitle(input), want));
  }
});

describe('renderTable', () => {
  it('draws a Unicode box with centred titles and left-aligned cells', () => {
    assert.equal(
      renderTable(['Name', 'Primary'], [['a', '<none> <S>'], ['bb', 'b']]),
      '┌──────┬────────────┐\n│ NAME │  PRIMARY   │\n├──────┼────────────┤\n│ a    │ <none> <S> │\n│ bb   │ b          │\n└──────┴────────────┘\n',
    );
  });

  it('sizes columns by the widest of title and cells', () => {
    assert.equal(
      renderTable(['Name', 'RF'], [['x/y', '3'], ['a/b/c/d', '12']]),
      '┌─────────┬────┐\n│  NAME   │ RF │\n├─────────┼────┤\n│ x/y     │ 3  │\n│ a/b/c/d │ 12 │\n└─────────┴────┘\n',
    );
  });

  it('renders the fragments table', () => {
    assert.equal(
      renderTable(
        ['Journal', 'Offset', 'Length', 'Persisted', 'SHA1', 'Compression'],
        [
          ['acme/events', '0', '1.5 MiB', '3 seconds ago', 'fdec1d1cec81...', 'GZIP'],
          ['acme/events', '1572864', '15 B', '', '0123456789ab...', 'SNAPPY'],
        ],
      ),
      '┌─────────────┬─────────┬─────────┬───────────────┬─────────────────┬─────────────┐\n' +
        '│   JOURNAL   │ OFFSET  │ LENGTH  │   PERSISTED   │      SHA 1      │ COMPRESSION │\n' +
        '├─────────────┼─────────┼─────────┼───────────────┼─────────────────┼─────────────┤\n' +
        '│ acme/events │ 0       │ 1.5 MiB │ 3 seconds ago │ fdec1d1cec81... │ GZIP        │\n' +
        '│ acme/events │ 1572864 │ 15 B    │               │ 0123456789ab... │ SNAPPY      │\n' +
        '└─────────────┴─────────┴─────────┴───────────────┴─────────────────┴─────────────┘\n',
    );
  });

  it('draws no header separator when there are no rows', () => {
    assert.equal(renderTable(['Name', 'X'], []), '┌──────┬───┐\n│ NAME │ X │\n└──────┴───┘\n');
  });

  it('pads by display width: wide (East Asian) characters take two columns', () => {
    // Journal names may hold any Unicode letter.
    assert.equal(
      renderTable(['Name'], [['日本/x'], ['ab']]),
      '┌────────┐\n│  NAME  │\n├────────┤\n│ 日本/x │\n│ ab     │\n└────────┘\n',
    );
  });
});

describe('humanizeBytes (go-humanize IBytes)', () => {
  const cases: [bigint | number, string][] = [
    [0, '0 B'],
    [1, '1 B'],
    [9, '9 B'],
    [10, '10 B'],
    [15, '15 B'],
    [1000, '1000 B'],
    [1023, '1023 B'],
    [1024, '1.0 KiB'],
    [1025, '1.0 KiB'],
    [1536, '1.5 KiB'],
    [10239, '10 KiB'],
    [10240, '10 KiB'],
    [102400, '100 KiB'],
    [1048575, '1024 KiB'],
    [1048576, '1.0 MiB'],
    [1572864, '1.5 MiB'],
    [536870912, '512 MiB'],
    [1073741824, '1.0 GiB'],
    [1099511627776, '1.0 TiB'],
    [1125899906842624n, '1.0 PiB'],
    [1152921504606846976n, '1.0 EiB'],
    [18446744073709551615n, '16 EiB'],
  ];
  for (const [n, want] of cases) {
    it(`${n} → ${want}`, () => assert.equal(humanizeBytes(n), want));
  }
  it('accepts numbers and bigints alike', () => assert.equal(humanizeBytes(1572864n), humanizeBytes(1572864)));
});

describe('humanizeTime (go-humanize RelTime, "ago" / "from now")', () => {
  const NOW = 1_800_000_000;
  const D = 86400;
  const cases: [number, string][] = [
    [0, 'now'],
    [1, '1 second ago'],
    [2, '2 seconds ago'],
    [59, '59 seconds ago'],
    [60, '1 minute ago'],
    [119, '1 minute ago'],
    [120, '2 minutes ago'],
    [3599, '59 minutes ago'],
    [3600, '1 hour ago'],
    [7199, '1 hour ago'],
    [7200, '2 hours ago'],
    [D - 1, '23 hours ago'],
    [D, '1 day ago'],
    [2 * D - 1, '1 day ago'],
    [2 * D, '2 days ago'],
    [7 * D - 1, '6 days ago'],
    [7 * D, '1 week ago'],
    [13 * D, '1 week ago'],
    [14 * D, '2 weeks ago'],
    [29 * D, '4 weeks ago'],
    [30 * D, '1 month ago'],
    [59 * D, '1 month ago'],
    [60 * D, '2 months ago'],
    [359 * D, '11 months ago'],
    [360 * D, '1 year ago'],
    [539 * D, '1 year ago'],
    [540 * D, '2 years ago'],
    [721 * D, '2 years ago'],
    [37 * 360 * D - 1, '36 years ago'],
    [37 * 360 * D, 'a long while ago'],
    [-1, '1 second from now'],
    [-59, '59 seconds from now'],
    [-3600, '1 hour from now'],
    [-2 * D, '2 days from now'],
    [-400 * D, '1 year from now'],
  ];
  for (const [ago, want] of cases) {
    it(`${ago} s before now → ${want}`, () => assert.equal(humanizeTime(NOW - ago, NOW), want));
  }
  it('defaults "now" to the current time', () => {
    assert.equal(humanizeTime(Math.floor(Date.now() / 1000) - 3 * 3600), '3 hours ago');
  });
});
