// Progress of long work (deletes, scans, batched applies) on stderr: a bar redrawn in place on a
// terminal, nothing at all otherwise (scripts read the summary line the command prints at the
// end). Colour only on a terminal and never with NO_COLOR.

import { colourDisabled } from './log.js';

export interface ProgressOptions {
  /** What is counted, e.g. "deleted". */
  label: string;
  total: number;
  /** Bytes in total, when the work is measured in bytes too. */
  totalBytes?: number;
  /** Tests: the stream, and whether it counts as a terminal. */
  stream?: NodeJS.WriteStream;
  isTTY?: boolean;
}

const WIDTH = 30;

export class Progress {
  private done = 0;
  private bytes = 0;
  private lastDraw = 0;
  private readonly tty: boolean;
  private readonly out: NodeJS.WriteStream;
  private readonly colour: boolean;

  constructor(private readonly o: ProgressOptions) {
    this.out = o.stream ?? process.stderr;
    this.tty = o.isTTY ?? Boolean(this.out.isTTY);
    this.colour = this.tty && !colourDisabled();
  }

  /** Counts `n` more items (and `bytes`). Redraws at most every 100 ms. */
  tick(n = 1, bytes = 0): void {
    this.done += n;
    this.bytes += bytes;
    if (!this.tty) return;
    const now = Date.now();
    if (now - this.lastDraw < 100 && this.done < this.o.total) return;
    this.lastDraw = now;
    this.draw();
  }

  /** Ends the bar (a newline on a terminal). */
  finish(): void {
    if (!this.tty) return;
    this.draw();
    this.out.write('\n');
  }

  private draw(): void {
    const frac = this.o.total > 0 ? Math.min(1, this.done / this.o.total) : 1;
    const filled = Math.round(frac * WIDTH);
    let bar = '#'.repeat(filled) + '-'.repeat(WIDTH - filled);
    if (this.colour) bar = `\u001b[32m${bar.slice(0, filled)}\u001b[2m${bar.slice(filled)}\u001b[0m`;
    const bytes = this.o.totalBytes !== undefined ? `  ${formatBytes(this.bytes)} / ${formatBytes(this.o.totalBytes)}` : '';
    this.out.write(`\r[${bar}] ${this.done}/${this.o.total} ${this.o.label}${bytes}`);
  }
}

/** 1536 → "1.5 KiB". */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}
