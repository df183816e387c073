// Confirmation before destructive work (prune, fork cleanup, reset-head, unassign). The command
// prints its plan first; then:
//   --dry-run            nothing is done (the caller stops after the plan);
//   --yes                go ahead without asking (cron);
//   a terminal           ask on stderr, default "no";
//   no terminal, no --yes  refuse with a usage error, so a script never deletes by accident.
import { UsageError } from './exit.js';

export interface ConfirmOptions {
  /** The question, e.g. "Delete 12 dead-end fragments (3.1 MiB)?" */
  question: string;
  yes: boolean;
  dryRun: boolean;
  /** What the command would do, for the refusal message: "delete fragments". */
  action: string;
  /** Tests: stand-ins for the terminal check and the prompt. */
  isTTY?: boolean;
  ask?: (question: string) => Promise<boolean>;
}

/** The usage error for --dry-run with --yes, checked before any work (they ask for opposite things). */
export function checkConfirmFlags(o: { dryRun: boolean; yes: boolean }): void {
  if (o.dryRun && o.yes) throw new UsageError('--dry-run and --yes contradict each other');
}

/** Whether to go ahead. False for --dry-run and for a "no" at the prompt. */
export async function confirmDestructive(o: ConfirmOptions): Promise<boolean> {
  if (o.dryRun) return false;
  if (o.yes) return true;
  const tty = o.isTTY ?? Boolean(process.stdin.isTTY && process.stderr.isTTY);
  if (!tty) {
    throw new UsageError(`refusing to ${o.action} without confirmation: stdin is not a terminal (pass --yes, or --dry-run to only see the plan)`);
  }
  const ask = o.ask ?? askOnTerminal;
  return ask(o.question);
}

async function askOnTerminal(question: string): Promise<boolean> {
  // Loaded only when a prompt is shown: the prompt library is not on the start-up path.
  const { confirm } = await import('@inquirer/prompts');
  try {
    return await confirm({ message: question, default: false }, { output: process.stderr });
  } catch (err) {
    // Ctrl-C at the prompt: treat as "no".
    if ((err as Error).name === 'ExitPromptError') return false;
    throw err;
  }
}
