// Go's time.Format, for `.FirstAppendTime.Format "2006-01-02"` in path postfix templates. A Go
// layout is written as the reference time Mon Jan 2 15:04:05 MST 2006 would look; each element of
// it is replaced by the same element of the formatted time. Times here are UTC (spools record
// their first append in UTC), so zone elements render as `UTC`, `Z` or `+00:00` forms.

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

const pad = (n: number, w: number, c = '0') => String(n).padStart(w, c);

/** Fraction digits of a `.000` / `,999` element at `i`, or 0 when there is none. */
function fractionAt(layout: string, i: number): number {
  const sep = layout[i];
  if (sep !== '.' && sep !== ',') return 0;
  const d = layout[i + 1];
  if (d !== '0' && d !== '9') return 0;
  let j = i + 1;
  while (layout[j] === d) j++;
  // Go takes a run of 0s or 9s after the separator only when no digit follows it.
  if (/[0-9]/.test(layout[j] ?? '')) return 0;
  return j - i - 1;
}

/** Formats `t` (taken in UTC) with Go layout `layout`; `nanos` adds sub-millisecond precision. */
export function formatGoTime(t: Date, layout: string, nanos = t.getUTCMilliseconds() * 1_000_000): string {
  const Y = t.getUTCFullYear();
  const M = t.getUTCMonth();
  const D = t.getUTCDate();
  const h = t.getUTCHours();
  const m = t.getUTCMinutes();
  const s = t.getUTCSeconds();
  const wd = t.getUTCDay();
  const yday = Math.floor((Date.UTC(Y, M, D) - Date.UTC(Y, 0, 1)) / 86400000) + 1;
  const h12 = h % 12 === 0 ? 12 : h % 12;
  let out = '';
  let i = 0;
  const at = (s2: string) => layout.startsWith(s2, i);
  while (i < layout.length) {
    const take = (text: string, n: number) => {
      out += text;
      i += n;
    };
    const c = layout[i]!;
    switch (c) {
      case 'J':
        if (at('January')) { take(MONTHS[M]!, 7); continue; }
        if (at('Jan')) { take(MONTHS[M]!.slice(0, 3), 3); continue; }
        break;
      case 'M':
        if (at('Monday')) { take(DAYS[wd]!, 6); continue; }
        if (at('Mon')) { take(DAYS[wd]!.slice(0, 3), 3); continue; }
        if (at('MST')) { take('UTC', 3); continue; }
        break;
      case '0':
        if (at('002')) { take(pad(yday, 3), 3); continue; }
        if (/^0[1-6]/.test(layout.slice(i, i + 2))) {
          const v = [0, M + 1, D, h12, m, s, Y % 100][Number(layout[i + 1])]!;
          take(pad(v, 2), 2);
          continue;
        }
        break;
      case '1':
        if (at('15')) { take(pad(h, 2), 2); continue; }
        take(String(M + 1), 1);
        continue;
      case '2':
        if (at('2006')) { take(pad(Y, 4), 4); continue; }
        take(String(D), 1);
        continue;
      case '_':
        if (at('_2006')) { take('_' + pad(Y, 4), 5); continue; }
        if (at('__2')) { take(pad(yday, 3, ' '), 3); continue; }
        if (at('_2')) { take(pad(D, 2, ' '), 2); continue; }
        break;
      case '3': take(String(h12), 1); continue;
      case '4': take(String(m), 1); continue;
      case '5': take(String(s), 1); continue;
      case 'P':
        if (at('PM')) { take(h >= 12 ? 'PM' : 'AM', 2); continue; }
        break;
      case 'p':
        if (at('pm')) { take(h >= 12 ? 'pm' : 'am', 2); continue; }
        break;
      case '-':
      case 'Z': {
        const z = c === 'Z';
        const forms: [string, string][] = [
          ['070000', '+000000'], ['07:00:00', '+00:00:00'], ['0700', '+0000'], ['07:00', '+00:00'], ['07', '+00'],
        ];
        const f = forms.find(([p]) => layout.startsWith(p, i + 1));
        if (f) { take(z ? 'Z' : f[1], 1 + f[0].length); continue; }
        break;
      }
      case '.':
      case ',': {
        const n = fractionAt(layout, i);
        if (n > 0) {
          let digits = pad(nanos, 9).slice(0, n);
          if (layout[i + 1] === '9') {
            digits = digits.replace(/0+$/, '');
            take(digits ? c + digits : '', n + 1);
          } else {
            take(c + digits, n + 1);
          }
          continue;
        }
        break;
      }
    }
    take(c, 1);
  }
  return out;
}

/** Go's default rendering of a time.Time (`2006-01-02 15:04:05.999999999 -0700 MST`), in UTC. */
export function goTimeString(t: Date): string {
  return formatGoTime(t, '2006-01-02 15:04:05.999999999 -0700 MST');
}
