// Shared helpers of the validation modules: every failure is a ValidationError whose message is
// one line naming the subject, the field and the bad value.
import { ValidationError } from '../errors.js';

export const q = (s: string): string => JSON.stringify(s);

export function fail(message: string, subject?: string): never {
  throw new ValidationError(message, subject);
}

/** Runs `fn`, prefixing any ValidationError it throws with `subject`. */
export function within(subject: string, fn: () => void): void {
  try {
    fn();
  } catch (e) {
    throw prefixed(e, subject);
  }
}

/** What `within(subject, ...)` rethrows for `e`: a ValidationError prefixed with `subject`, anything else as it is. */
export function prefixed(e: unknown, subject: string): unknown {
  return e instanceof ValidationError ? new ValidationError(e.message, subject) : e;
}
