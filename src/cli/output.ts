// An output sink for streamed bytes (stdout or a file) that honours backpressure, and a tiny
// async mutex used to keep each reader's fragment contiguous in the shared output.
import { createWriteStream, type WriteStream } from 'node:fs';
import { once } from 'node:events';
import { GazctlError } from '../lib/protocol/errors.js';
import { OutputClosedError } from './exit.js';

export class Output {
  private stream: NodeJS.WritableStream | WriteStream;
  private readonly isFile: boolean;
  private failure?: Error;

  constructor(path: string) {
    this.isFile = path !== '-' && path !== '';
    this.stream = this.isFile ? createWriteStream(path) : process.stdout;
    (this.stream as NodeJS.EventEmitter).on('error', (err: NodeJS.ErrnoException) => {
      // stdout's reader went away (`| head`): not a failure to report (see EXIT.PIPE).
      this.failure ??= !this.isFile && err.code === 'EPIPE' ? new OutputClosedError('stdout was closed by its reader', { cause: err }) : err;
    });
  }

  /**
   * Writes `chunk`, waiting while the stream's buffer is full. `done`, when given, is called once
   * the stream is finished with `chunk` (written out, or failed), and not before: a chunk's memory
   * may be reused from then on (see ReadChunk.release).
   */
  async write(chunk: Uint8Array, done?: () => void): Promise<void> {
    if (this.failure) throw this.error();
    if (!(done ? this.stream.write(chunk, () => done()) : this.stream.write(chunk))) {
      try {
        await once(this.stream, 'drain');
      } catch {
        // The stream failed while we waited: our 'error' listener (registered first) has kept why.
        throw this.error();
      }
    }
  }

  async close(): Promise<void> {
    if (this.failure) throw this.error();
    if (!this.isFile) return;
    const s = this.stream as WriteStream;
    await new Promise<void>((resolve, reject) => s.end((err?: Error | null) => (err ? reject(err) : resolve())));
  }

  private error(): GazctlError {
    const f = this.failure!;
    return f instanceof OutputClosedError ? f : new GazctlError(`cannot write output: ${f.message}`);
  }
}

export class Mutex {
  private tail: Promise<void> = Promise.resolve();

  /** Resolves with a release function once the lock is held. */
  lock(): Promise<() => void> {
    let release!: () => void;
    const next = new Promise<void>((r) => (release = r));
    const prev = this.tail;
    this.tail = prev.then(() => next);
    return prev.then(() => release);
  }
}
