// Output helpers shared by list commands: the boxed table upstream gazctl prints, humanized
// sizes and times for fragment listings, and the -o/--format option.
import { choiceOption } from './options.js';

/** -o/--format, gazctl.ini `Format`; the first choice is the default. */
export const formatOption = <C extends string>(choices: readonly [C, ...C[]]) =>
  choiceOption({ char: 'o', choices, default: choices[0], showDefault: true, description: `Output format: ${choices.join(', ')}.`, ini: { field: 'Format' } });

type CharClass = 'lower' | 'upper' | 'digit' | 'other' | 'sep';

function charClass(ch: string): CharClass {
  if (ch === '_' || /\s/u.test(ch)) return 'sep';
  if (/\p{Ll}/u.test(ch)) return 'lower';
  if (/\p{Lu}/u.test(ch)) return 'upper';
  if (/\p{N}/u.test(ch)) return 'digit';
  return 'other';
}

/** Splits a title into words the way upstream's table library does: by character class, camel-case aware. */
function splitWords(s: string): string[] {
  const runs: { cls: CharClass; text: string }[] = [];
  for (const ch of s) {
    const cls = charClass(ch);
    const last = runs[runs.length - 1];
    if (last && last.cls === cls) last.text += ch;
    else runs.push({ cls, text: ch });
  }
  // "HTTPServer": the last capital of an upper run starts the following lower-case word.
  for (let i = 0; i + 1 < runs.length; i++) {
    const a = runs[i]!;
    const b = runs[i + 1]!;
    if (a.cls === 'upper' && b.cls === 'lower' && [...a.text].length > 1) {
      const chars = [...a.text];
      b.text = chars.pop()! + b.text;
      a.text = chars.join('');
    } else if (a.cls === 'upper' && b.cls === 'lower') {
      b.text = a.text + b.text;
      a.text = '';
    }
  }
  return runs.filter((r) => r.cls !== 'sep' && r.text !== '').map((r) => r.text);
}

function isNumOrSpace(ch: string | undefined): boolean {
  return ch !== undefined && /[\p{N}\s]/u.test(ch);
}

/** Column titles as upstream renders them: words split and spaced, word-joining dots dropped, upper-cased. */
export function headerTitle(s: string): string {
  const chars = [...splitWords(s).join(' ')];
  for (let i = 0; i < chars.length; i++) {
    if (chars[i] === '_') chars[i] = ' ';
    else if (chars[i] === '.' && ((i > 0 && !isNumOrSpace(chars[i - 1])) || (i < chars.length - 1 && !isNumOrSpace(chars[i + 1])))) {
      chars[i] = ' ';
    }
  }
  return chars.join('').trim().toUpperCase();
}

function isWide(cp: number): boolean {
  return (
    (cp >= 0x1100 && cp <= 0x115f) ||
    (cp >= 0x2e80 && cp <= 0x303e) ||
    (cp >= 0x3041 && cp <= 0x33ff) ||
    (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x4e00 && cp <= 0x9fff) ||
    (cp >= 0xa000 && cp <= 0xa4cf) ||
    (cp >= 0xac00 && cp <= 0xd7a3) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0xfe30 && cp <= 0xfe4f) ||
    (cp >= 0xff00 && cp <= 0xff60) ||
    (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f300 && cp <= 0x1f64f) ||
    (cp >= 0x1f900 && cp <= 0x1f9ff) ||
    (cp >= 0x20000 && cp <= 0x3fffd)
  );
}

const BEYOND_NARROW = /[^\u0000-\u10ff]/;

/** Terminal columns taken by a string: East Asian wide characters take two. */
export function displayWidth(s: string): number {
  // Nothing below U+1100 is wide, and such text has no surrogate pairs: one column per unit.
  if (!BEYOND_NARROW.test(s)) return s.length;
  let w = 0;
  for (const ch of s) w += isWide(ch.codePointAt(0)!) ? 2 : 1;
  return w;
}

/** Renders rows as a Unicode box table with a centred header row. */
export function renderTable(headers: string[], rows: string[][]): string {
  const titles = headers.map(headerTitle);
  const widths = titles.map((t) => displayWidth(t));
  const ncol = widths.length;
  // Cell widths are measured once, into one flat array (a listing can have many thousands of rows).
  const cellWidths = new Float64Array(rows.length * ncol);
  for (let ri = 0; ri < rows.length; ri++) {
    const r = rows[ri]!;
    for (let i = 0; i < ncol; i++) {
      const w = displayWidth(r[i] ?? '');
      cellWidths[ri * ncol + i] = w;
      if (w > widths[i]!) widths[i] = w;
    }
  }
  const line = (l: string, m: string, r: string) => l + widths.map((w) => '─'.repeat(w + 2)).join(m) + r;
  const centre = (s: string, w: number) => {
    const pad = w - displayWidth(s);
    const left = Math.floor(pad / 2);
    return ' '.repeat(left) + s + ' '.repeat(pad - left);
  };
  // Padding strings by length, made once each.
  const pads: string[] = [];
  const pad = (n: number) => pads[n] ?? (pads[n] = ' '.repeat(n));
  let out = line('┌', '┬', '┐') + '\n';
  out += '│' + titles.map((t, i) => ` ${centre(t, widths[i]!)} `).join('│') + '│\n';
  if (rows.length > 0) out += line('├', '┼', '┤') + '\n';
  for (let ri = 0; ri < rows.length; ri++) {
    const r = rows[ri]!;
    let text = '│';
    for (let i = 0; i < ncol; i++) text += ' ' + (r[i] ?? '') + pad(widths[i]! - cellWidths[ri * ncol + i]!) + ' │';
    out += text + '\n';
  }
  out += line('└', '┴', '┘') + '\n';
  return out;
}

const IEC = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

/** IEC size as upstream humanizes fragment lengths: 15 B, 1.0 KiB, 1.5 MiB, 512 MiB. */
export function humanizeBytes(n: bigint | number): string {
  const v = Number(n);
  if (v < 10) return `${v} B`;
  const e = Math.min(Math.floor(Math.log(v) / Math.log(1024)), IEC.length - 1);
  const scaled = v / 1024 ** e;
  const rounded = Math.floor(scaled * 10 + 0.5) / 10;
  return rounded < 10 ? `${rounded.toFixed(1)} ${IEC[e]}` : `${rounded.toFixed(0)} ${IEC[e]}`;
}

const DAY = 86400;
const TIME_STEPS: [number, string, number][] = [
  // [bound in seconds, format, divisor]; %d is replaced by floor(d / divisor)
  [1, 'now', 1],
  [2, '1 second %s', 1],
  [60, '%d seconds %s', 1],
  [120, '1 minute %s', 1],
  [3600, '%d minutes %s', 60],
  [7200, '1 hour %s', 1],
  [DAY, '%d hours %s', 3600],
  [2 * DAY, '1 day %s', 1],
  [7 * DAY, '%d days %s', DAY],
  [14 * DAY, '1 week %s', 1],
  [30 * DAY, '%d weeks %s', 7 * DAY],
  [60 * DAY, '1 month %s', 1],
  [360 * DAY, '%d months %s', 30 * DAY],
  [540 * DAY, '1 year %s', 1],
  [720 * DAY, '2 years %s', 1],
  [37 * 360 * DAY, '%d years %s', 360 * DAY],
];

/** Relative time as upstream humanizes persist times: "3 minutes ago". */
export function humanizeTime(unixSeconds: number, nowSeconds = Date.now() / 1000): string {
  let d = nowSeconds - unixSeconds;
  let label = 'ago';
  if (d < 0) {
    d = -d;
    label = 'from now';
  }
  for (const [bound, fmt, div] of TIME_STEPS) {
    if (d < bound) return fmt.replace('%d', String(Math.floor(d / div))).replace('%s', label);
  }
  return 'a long while ' + label;
}
