// A file-system facade over node:fs whose changes are recorded into a recovery log, like
// upstream's RecordedAferoFS: each change is made on disk first, then recorded (the recorder
// records only what already happened). Reads are not recorded: read with node:fs directly.
import { constants as FS } from 'node:fs';
import { link, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { RecoveryLogError } from './framing.js';
import type { Recorder } from './recorder.js';

/** A file opened for writing through a RecordedFs. */
export class RecordedFile {
  /** Where the next `write` goes (upstream's FileRecorder offset). */
  offset = 0n;

  constructor(
    readonly recorder: Recorder,
    readonly fnode: bigint,
    readonly path: string,
    private readonly handle: FileHandle,
  ) {}

  /** Writes all of `data` at the current offset, and records it. */
  async write(data: Uint8Array | string): Promise<void> {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    await this.writeAll(bytes, this.offset);
    this.recorder.recordWriteAt(this.fnode, bytes, this.offset);
    this.offset += BigInt(bytes.length);
  }

  /** Writes all of `data` at `position` (the current offset is unchanged), and records it. */
  async writeAt(data: Uint8Array, position: bigint): Promise<void> {
    await this.writeAll(data, position);
    this.recorder.recordWriteAt(this.fnode, data, position);
  }

  private async writeAll(data: Uint8Array, position: bigint): Promise<void> {
    let done = 0;
    while (done < data.length) {
      const { bytesWritten } = await this.handle.write(data, done, data.length - done, Number(position) + done);
      done += bytesWritten;
    }
  }

  /** Moves the offset of the next `write`. */
  seek(position: bigint): void {
    if (position < 0n) throw new RecoveryLogError(`seek of ${this.path} to a negative offset`);
    this.offset = position;
  }

  /** Syncs the file to disk, then waits until everything recorded so far is in the log. */
  async sync(): Promise<void> {
    await this.handle.sync();
    await this.recorder.barrier();
  }

  /** Closes the file (nothing is recorded). */
  close(): Promise<void> {
    return this.handle.close();
  }
}

/** Open flags by name, for convenience (as node:fs's string flags mean). */
const NAMED_FLAGS: Record<string, number> = {
  w: FS.O_WRONLY | FS.O_CREAT | FS.O_TRUNC,
  'w+': FS.O_RDWR | FS.O_CREAT | FS.O_TRUNC,
  wx: FS.O_WRONLY | FS.O_CREAT | FS.O_TRUNC | FS.O_EXCL,
  'wx+': FS.O_RDWR | FS.O_CREAT | FS.O_TRUNC | FS.O_EXCL,
  'r+': FS.O_RDWR,
};

export class RecordedFs {
  constructor(readonly recorder: Recorder) {}

  /** The recorder's directory. */
  get dir(): string {
    return this.recorder.dir;
  }

  /** Creates or truncates `file` for writing (O_RDWR | O_CREAT | O_TRUNC). */
  create(file: string, mode = 0o666): Promise<RecordedFile> {
    return this.openFile(file, FS.O_RDWR | FS.O_CREAT | FS.O_TRUNC, mode);
  }

  /**
   * Opens `file` for writing with node:fs numeric flags (or one of 'w', 'w+', 'wx', 'wx+', 'r+').
   * O_TRUNC of an existing file is recorded as a new file replacing it; O_APPEND is refused.
   */
  async openFile(file: string, flags: number | string, mode = 0o666): Promise<RecordedFile> {
    const f = typeof flags === 'string' ? NAMED_FLAGS[flags] : flags;
    if (f === undefined) throw new RecoveryLogError(`unsupported open flags ${JSON.stringify(flags)} of ${file}`);
    if ((f & (FS.O_WRONLY | FS.O_RDWR)) === 0) throw new RecoveryLogError(`open of ${file} for reading only: read it with node:fs`);
    if (f & FS.O_APPEND) throw new RecoveryLogError(`O_APPEND is not supported by a recorded file system (${file})`);
    this.recorder.normalizePath(file); // throws before touching the disk when outside dir
    const handle = await open(file, f, mode);
    try {
      const fnode = this.recorder.recordOpenFile(file, f);
      return new RecordedFile(this.recorder, fnode, file, handle);
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  /** Removes `file`, and records it. */
  async remove(file: string): Promise<void> {
    await rm(file);
    this.recorder.recordRemove(file);
  }

  /** Renames `from` to `to` (replacing a file at `to`), and records it. */
  async rename(from: string, to: string): Promise<void> {
    await rename(from, to);
    this.recorder.recordRename(from, to);
  }

  /** Adds the hard link `to` of the file at `from`, and records it. */
  async link(from: string, to: string): Promise<void> {
    await link(from, to);
    this.recorder.recordLink(from, to);
  }

  /** Waits until everything recorded so far is in the log (a directory sync). */
  async sync(): Promise<void> {
    await this.recorder.barrier();
  }
}
