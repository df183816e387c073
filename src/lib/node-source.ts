// Node's own JavaScript modules, as this binary holds them: for the few places where gazctl
// relies on how a Node module works inside, and checks that it still works that way first.

/**
 * The source of Node's module `id` (as `lib/<id>.js` in Node's tree), or undefined when it cannot
 * be read. process.binding is deprecated (a warning under --pending-deprecation): none is
 * printed for this look.
 */
export function nodeLibSource(id: string): string | undefined {
  const quiet = process.noDeprecation;
  process.noDeprecation = true;
  try {
    const src = (process as unknown as { binding(name: string): Record<string, unknown> }).binding('natives')[id];
    return typeof src === 'string' ? src : undefined;
  } catch {
    return undefined;
  } finally {
    process.noDeprecation = quiet;
  }
}
