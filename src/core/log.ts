// The logger of the core's daemons (broker and consumer): one line per event on stderr, as text
// (`time level msg key=value…`) or JSON, filtered by level.

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';
export const LOG_LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'];

const RANK: Record<LogLevel, number> = { trace: 0, debug: 1, info: 2, warn: 3, error: 4, fatal: 5 };

export type Fields = Record<string, unknown>;

export class Logger {
  constructor(
    private readonly level: LogLevel = 'warn',
    private readonly format: 'json' | 'text' | 'color' = 'text',
    private readonly out: (line: string) => void = (l) => process.stderr.write(l + '\n'),
  ) {}

  enabled(level: LogLevel): boolean {
    return RANK[level] >= RANK[this.level];
  }

  log(level: LogLevel, msg: string, fields: Fields = {}): void {
    if (!this.enabled(level)) return;
    const time = new Date().toISOString();
    if (this.format === 'json') {
      this.out(JSON.stringify({ level, msg, time, ...fields }, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)));
      return;
    }
    const kv = Object.entries(fields)
      .map(([k, v]) => `${k}=${fmt(v)}`)
      .join(' ');
    this.out(`${time} ${level.toUpperCase().padEnd(5)} ${msg}${kv ? ' ' + kv : ''}`);
  }

  debug(msg: string, f?: Fields): void {
    this.log('debug', msg, f);
  }
  info(msg: string, f?: Fields): void {
    this.log('info', msg, f);
  }
  warn(msg: string, f?: Fields): void {
    this.log('warn', msg, f);
  }
  error(msg: string, f?: Fields): void {
    this.log('error', msg, f);
  }
}

function fmt(v: unknown): string {
  if (v instanceof Error) return JSON.stringify(v.message);
  const s = typeof v === 'string' ? v : typeof v === 'bigint' ? v.toString() : JSON.stringify(v);
  return /[\s"=]/.test(s ?? '') ? JSON.stringify(s) : String(s);
}
