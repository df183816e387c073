// Exit codes, and which errors map to which. They belong to the CLI: the library throws typed
// errors (src/lib/protocol/errors.ts) and knows nothing of processes.
//
//   0  success
//   1  failure: the command ran and something went wrong (a refused apply, an unreachable broker,
//      an unreadable input file, a spec that does not validate)
//   2  usage: the command line (or gazctl.ini, or an environment variable standing in for a flag)
//      is wrong: an unknown flag, a missing required flag, a bad flag value
//   141  stdout was closed by its reader (`gazctl journals read ... | head`): no message, and the
//      status of a process killed by SIGPIPE (128 + 13), which is how Go gazctl, kubectl or cat
//      end there. Node ignores SIGPIPE, so the write fails with EPIPE instead.
import { GazctlError } from '../lib/protocol/errors.js';

export const EXIT = { OK: 0, ERROR: 1, USAGE: 2, PIPE: 141 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A usage problem: a bad flag, flag value or flag combination. Exit code 2. */
export class UsageError extends GazctlError {}

/** The reader of stdout closed it (EPIPE): the command stops quietly with EXIT.PIPE. */
export class OutputClosedError extends GazctlError {}

/** Whether `err` or one of its causes (a few levels down) is a `kind`. */
function hasCause(err: unknown, kind: new (...args: never[]) => Error): boolean {
  for (let e: unknown = err, i = 0; e && i < 8; e = (e as { cause?: unknown }).cause, i++) {
    if (e instanceof kind) return true;
  }
  return false;
}

/** The exit code of a command that failed with `err`. */
export function exitCodeFor(err: unknown): ExitCode {
  if (hasCause(err, OutputClosedError)) return EXIT.PIPE;
  // A usage error keeps its code when wrapped (e.g. "apply failed: …" with it as the cause).
  if (hasCause(err, UsageError)) return EXIT.USAGE;
  // oclif's own parse errors (unknown flag, bad choice, missing value) carry `oclif.exit`.
  const oclif = (err as { oclif?: { exit?: number } } | null)?.oclif;
  if (!(err instanceof GazctlError) && oclif?.exit !== undefined && oclif.exit !== 0) return EXIT.USAGE;
  return EXIT.ERROR;
}
