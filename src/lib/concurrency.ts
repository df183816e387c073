// Bounded parallelism for work over many journals or fragments.

/** `fn` over `items`, at most `limit` at a time; results in input order. The first failure rejects. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (t: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return out;
}
