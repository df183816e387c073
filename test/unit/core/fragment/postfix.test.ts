// Go time layouts and the path postfix template subset.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { formatGoTime, goTimeString } from '../../../../src/core/fragment/gotime.js';
import { evaluatePostfixTemplate, PostfixTemplateError } from '../../../../src/core/fragment/postfix.js';
import { CompressionCodec, type JournalSpec } from '../../../../src/lib/protocol/gen/broker/protocol.js';

// Tue, 5 Mar 2024 14:07:09.0123 UTC (day 65 of the year).
const T = new Date(Date.UTC(2024, 2, 5, 14, 7, 9, 12));

describe('formatGoTime', () => {
  // Expected strings are what Go's time.Format gives for this time in UTC.
  const cases: [string, string][] = [
    ['2006-01-02', '2024-03-05'],
    ['2006/01/02/15', '2024/03/05/14'],
    ['20060102T150405Z0700', '20240305T140709Z'],
    ['Jan _2 15:04:05', 'Mar  5 14:07:09'],
    ['January 2, 2006 3:04 PM', 'March 5, 2024 2:07 PM'],
    ['Mon Monday MST', 'Tue Tuesday UTC'],
    ['06 1 2 3 4 5 pm', '24 3 5 2 7 9 pm'],
    ['002 __2', '065  65'],
    ['15:04:05.000', '14:07:09.012'],
    ['15:04:05.999999', '14:07:09.012'],
    ['15:04:05,000000', '14:07:09,012000'],
    ['-0700 -07:00 -07 Z07:00', '+0000 +00:00 +00 Z'],
    ['date=2006-01-02/hour=15', 'date=2024-03-05/hour=14'],
    ['literal text: x', 'literal text: x'],
  ];
  for (const [layout, want] of cases) it(`formats ${JSON.stringify(layout)}`, () => assert.equal(formatGoTime(T, layout), want));

  it('drops a .999 fraction that is all zeros', () => {
    assert.equal(formatGoTime(new Date(Date.UTC(2024, 0, 1)), '15:04:05.999'), '00:00:00');
  });

  it('renders the default time.Time string', () => {
    assert.equal(goTimeString(T), '2024-03-05 14:07:09.012 +0000 UTC');
  });

  it('pads years and handles the 12 o\'clock hours', () => {
    assert.equal(formatGoTime(new Date(Date.UTC(2024, 0, 1, 0, 0, 0)), '3 03 PM'), '12 12 AM');
    assert.equal(formatGoTime(new Date(Date.UTC(2024, 0, 1, 12, 0, 0)), '3 PM'), '12 PM');
  });
});

const SPEC: JournalSpec = {
  name: 'a/journal',
  replication: 3,
  labels: { labels: [] },
  fragment: {
    length: 1024n,
    compression_codec: CompressionCodec.GZIP,
    stores: ['file:///x/'],
    refresh_interval: undefined,
    retention: undefined,
    flush_interval: undefined,
    path_postfix_template: '',
  },
  flags: 0,
  max_append_rate: 0n,
  suspend: undefined,
};
const SPOOL = {
  journal: 'a/journal',
  begin: 100n,
  end: 250n,
  compressionCodec: CompressionCodec.SNAPPY,
  firstAppendTime: T,
  registers: { labels: [{ name: 'reg', value: 'v', prefix: false }] },
};
const ev = (tpl: string) => evaluatePostfixTemplate(tpl, SPOOL, SPEC);

describe('evaluatePostfixTemplate', () => {
  it('is empty for an empty template', () => assert.equal(ev(''), ''));

  it('evaluates the date layout of the documentation', () => {
    assert.equal(ev('date={{ .Spool.FirstAppendTime.Format "2006-01-02" }}'), 'date=2024-03-05');
  });

  it('takes several actions and plain text', () => {
    assert.equal(
      ev('date={{ .Spool.FirstAppendTime.Format "2006-01-02" }}/hour={{ .Spool.FirstAppendTime.Format "15" }}/'),
      'date=2024-03-05/hour=14/',
    );
  });

  it('reads spool and spec fields, from the root and from $', () => {
    assert.equal(ev('{{.Spool.Journal}}|{{.Spool.Begin}}|{{.Spool.End}}|{{.Spool.CompressionCodec}}'), 'a/journal|100|250|SNAPPY');
    assert.equal(ev('{{.Name}}/{{.Replication}}/{{.JournalSpec.Name}}/{{$.Spool.Begin}}'), 'a/journal/3/a/journal/100');
    assert.equal(ev('{{ .JournalSpec.Fragment.Length }}'), '1024');
  });

  it('calls time methods and printf, and pipes', () => {
    assert.equal(ev('y={{.Spool.FirstAppendTime.Year}}/d={{.Spool.FirstAppendTime.YearDay}}'), 'y=2024/d=65');
    assert.equal(ev('{{ printf "%05d-%s" .Spool.Begin .Name }}'), '00100-a/journal');
    assert.equal(ev('{{ .Spool.FirstAppendTime.Unix | printf "t=%d" }}'), `t=${Math.floor(T.getTime() / 1000)}`);
    assert.equal(ev('{{ print "a" "b" }}'), 'ab');
    assert.equal(ev('{{ (.Spool.FirstAppendTime.UTC).Format "2006" }}'), '2024');
    assert.equal(ev('{{ printf "%s" (.Spool.FirstAppendTime.UTC).Year }}'), '2024');
  });

  it('trims around {{- and -}} and skips comments', () => {
    assert.equal(ev('a  {{- "b" -}}  c{{/* note */}}d'), 'abcd');
  });

  it('refuses templates the checker refuses', () => {
    assert.throws(() => ev('{{ .Spool.Nope }}'), PostfixTemplateError);
    assert.throws(() => ev('{{ .Spool.FirstAppendTime.Format "2006" '), PostfixTemplateError);
  });

  it('refuses control structures and unknown methods with a clear message', () => {
    assert.throws(() => ev('{{ if .Name }}x{{ end }}'), /\{\{if\}\} is not supported/);
    assert.throws(() => ev('{{ .Spool.FirstAppendTime.Weekday }}'), /can't evaluate field Weekday/);
  });
});
