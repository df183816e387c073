// The edit loop behind `journals edit` and `shards edit`: write the specs to a temp file,
// open the user's editor, apply what they saved, and reopen the editor with the error when
// validation or the apply itself fails, until it succeeds or the user saves an empty file.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GazctlError } from '../lib/protocol/errors.js';

const GEAR = '#\u2699';
const WARN = '#\u26a0';

export function editorCommand(env = process.env): string {
  return env.GAZ_EDITOR || env.EDITOR || 'vi';
}

function header(error: string | undefined): string[] {
  const lines = [
    `${GEAR} Edit the specs below, save and quit to apply them. Lines starting with ${GEAR} or ${WARN} are ignored.`,
    `${GEAR} Save an empty file to cancel. Revisions guard against concurrent changes:`,
    `${GEAR} an item that changed since it was listed is refused and nothing is applied.`,
    `${GEAR} If the specs fail to validate or to apply, this editor opens again with the error.`,
  ];
  if (error !== undefined) {
    lines.push(`${WARN} Your last edit failed and was NOT applied (or was applied only as said below):`, WARN);
    for (const l of error.split('\n')) lines.push(`${WARN} ${l}`);
    lines.push(WARN);
  }
  lines.push(`${GEAR} Line numbers in errors count from the first line after this header (${lines.length + 2} lines).`, GEAR);
  return lines;
}

/** Removes the generated header and error lines, normalising line endings. */
export function stripGenerated(text: string): string {
  return text
    .split('\n')
    .map((l) => l.replace(/\r$/, ''))
    .filter((l) => !l.startsWith(GEAR) && !l.startsWith(WARN))
    .join('\n');
}

export interface EditOptions {
  kind: 'journals' | 'shards';
  initial: string;
  /** Applies the edited text; throws GazctlError (validation or apply) to reopen the editor. */
  apply: (text: string) => Promise<void>;
  editor?: string;
}

export type EditOutcome = 'applied' | 'cancelled-empty' | 'cancelled-unchanged' | 'cancelled-invalid';

export async function editLoop(o: EditOptions): Promise<EditOutcome> {
  const dir = mkdtempSync(join(tmpdir(), `gazctl-${o.kind}-edit-`));
  const path = join(dir, `${o.kind}.yaml`);
  const editor = o.editor ?? editorCommand();
  let body = o.initial;
  let error: string | undefined;
  try {
    for (;;) {
      writeFileSync(path, header(error).join('\n') + '\n' + body);
      const r = spawnSync('/bin/sh', ['-c', `${editor} "$1"`, 'gazctl-editor', path], { stdio: 'inherit' });
      if (r.error) throw new GazctlError(`cannot run editor ${JSON.stringify(editor)}: ${r.error.message}`);
      if (r.status !== 0) {
        throw new GazctlError(`editor ${JSON.stringify(editor)} exited with status ${r.status ?? r.signal}; nothing was applied`);
      }
      const edited = stripGenerated(readFileSync(path, 'utf8'));
      if (edited.trim() === '') {
        process.stderr.write('Cancelled; empty file.\n');
        return 'cancelled-empty';
      }
      if (edited === stripGenerated(body)) {
        if (error === undefined) {
          process.stderr.write('Cancelled; nothing to do.\n');
          return 'cancelled-unchanged';
        }
        const keep = join(tmpdir(), `gazctl-${o.kind}-edit-${process.pid}.yaml`);
        writeFileSync(keep, edited);
        process.stderr.write(`Cancelled; no changes to invalid file. Last edits saved to ${keep}.\n`);
        return 'cancelled-invalid';
      }
      try {
        await o.apply(edited);
        return 'applied';
      } catch (err) {
        if (!(err instanceof GazctlError)) throw err;
        error = err.message;
        body = edited;
        process.stderr.write(`gazctl: ${err.message.split('\n')[0]} (reopening the editor)\n`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
