// Reading command input: a path, or "-" for stdin, with clear errors.
import { readFile } from 'node:fs/promises';
import { GazctlError } from '../lib/protocol/errors.js';

export async function readInput(path: string): Promise<string> {
  if (path === '-' || path === '') {
    if (process.stdin.isTTY) process.stderr.write('reading specs from stdin (end with Ctrl-D) ...\n');
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw inputError(path, err);
  }
}

/** `cannot read <path>: <why>` for a failure reading an input file (or stdin). */
export function inputError(path: string, err: unknown): GazctlError {
  if (err instanceof GazctlError) return err;
  const e = err as NodeJS.ErrnoException;
  const why = e.code === 'ENOENT' ? 'no such file' : e.code === 'EACCES' ? 'permission denied' : e.code === 'EISDIR' ? 'is a directory' : e.message;
  return new GazctlError(`cannot read ${path === '-' ? 'stdin' : path}: ${why}`, { cause: err });
}
