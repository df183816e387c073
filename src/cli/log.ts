// A small levelled logger for the CLI. All logs go to stderr; command output goes to stdout.
// Formats: `text` (logfmt like upstream: time="…" level=info msg="…" k=v), `json` (one
// object per line) and `color` (short coloured form). Default level is warn, as upstream.

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ['json', 'text', 'color'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

type Fields = Record<string, unknown>;

/**
 * NO_COLOR (no-color.org): any non-empty value means no colour escape codes, whatever the format
 * asked for or the terminal. Every colour path of gazctl asks this (the `color` log format, the
 * progress bar); oclif's help and the confirmation prompt (node:util styleText) honour it
 * themselves.
 */
export function colourDisabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return (env.NO_COLOR ?? '') !== '';
}

function fmtValue(v: unknown): string {
  const s = typeof v === 'bigint' ? v.toString() : typeof v === 'string' ? v : JSON.stringify(v, bigintReplacer);
  return /^[\w./:@%+-]+$/.test(s) ? s : JSON.stringify(s);
}

export function bigintReplacer(_k: string, v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString() : v;
}

export class Logger {
  private threshold: number;
  constructor(
    level: LogLevel = 'warn',
    private format: LogFormat = 'text',
    private out: (line: string) => void = (l) => process.stderr.write(l + '\n'),
  ) {
    this.threshold = LOG_LEVELS.indexOf(level);
  }

  enabled(level: LogLevel): boolean {
    return LOG_LEVELS.indexOf(level) >= this.threshold;
  }

  log(level: LogLevel, msg: string, fields: Fields = {}): void {
    if (!this.enabled(level)) return;
    const time = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    if (this.format === 'json') {
      this.out(JSON.stringify({ level: level === 'warn' ? 'warning' : level, msg, time, ...fields }, bigintReplacer));
      return;
    }
    const kv = Object.entries(fields)
      .map(([k, v]) => `${k}=${fmtValue(v)}`)
      .join(' ');
    if (this.format === 'color') {
      const colours: Record<LogLevel, number> = { trace: 37, debug: 37, info: 36, warn: 33, error: 31, fatal: 31 };
      const name = level.toUpperCase().slice(0, 4);
      const tag = colourDisabled() ? name : `\x1b[${colours[level]}m${name}\x1b[0m`;
      this.out(`${tag}[${time}] ${msg.padEnd(40)} ${kv}`.trimEnd());
      return;
    }
    // logrus spells the warn level "warning" in its text and JSON output.
    const name = level === 'warn' ? 'warning' : level;
    this.out(`time="${time}" level=${name} msg=${JSON.stringify(msg)}${kv ? ' ' + kv : ''}`);
  }

  trace(msg: string, f?: Fields) { this.log('trace', msg, f); }
  debug(msg: string, f?: Fields) { this.log('debug', msg, f); }
  info(msg: string, f?: Fields) { this.log('info', msg, f); }
  warn(msg: string, f?: Fields) { this.log('warn', msg, f); }
  error(msg: string, f?: Fields) { this.log('error', msg, f); }
}
