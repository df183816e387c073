// Output helpers shared by list commands: the boxed table upstream gazctl prints, humanized
// sizes and times for fragment listings, and the -o flag.
import { Flags } from '@oclif/core';

export const outputFlag = (options: readonly string[], def = 'table') =>
  Flags.option({ char: 'o', options, default: def, description: `Output format: ${options.join(', ')}.` })();

/** Column titles as upstream renders them: `_` and word-joining `.` become spaces, upper-cased. */
export function headerTitle(s: string): string {
  return s
    .replace(/_/g, ' ')
    .replace(/\.(?=[^\d\s])|(?<=[^\d\s])\./g, ' ')
    .replace(/(?<=\p{L})(?=\d)/gu, ' ')
    .toUpperCase()
    .trim();
}

function displayWidth(s: string): number {
  // Good enough for the ASCII and narrow Unicode cells gazctl prints.
  return [...s].length;
}

/** Renders rows as a Unicode box table with a centred header row. */
export function renderTable(headers: string[], rows: string[][]): string {
  const titles = headers.map(headerTitle);
  const widths = titles.map((t, i) => Math.max(displayWidth(t), ...rows.map((r) => displayWidth(r[i] ?? ''))));
  const line = (l: string, m: string, r: string) => l + widths.map((w) => '─'.repeat(w + 2)).join(m) + r;
  const centre = (s: string, w: number) => {
    const pad = w - displayWidth(s);
    const left = Math.floor(pad / 2);
    return ' '.repeat(left) + s + ' '.repeat(pad - left);
  };
  const left = (s: string, w: number) => s + ' '.repeat(w - displayWidth(s));
  const out = [line('┌', '┬', '┐')];
  out.push('│' + titles.map((t, i) => ` ${centre(t, widths[i]!)} `).join('│') + '│');
  out.push(line('├', '┼', '┤'));
  for (const r of rows) out.push('│' + widths.map((w, i) => ` ${left(r[i] ?? '', w)} `).join('│') + '│');
  out.push(line('└', '┴', '┘'));
  return out.join('\n') + '\n';
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
