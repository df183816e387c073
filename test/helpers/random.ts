// Seeded randomness for property tests: a small deterministic PRNG (mulberry32), so a failure
// names a seed that reproduces it.

export type Rand = () => number;

/** A generator of numbers in [0, 1), the same sequence for the same seed. */
export function rng(seed: number): Rand {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An integer in [0, n). */
export const below = (r: Rand, n: number): number => Math.floor(r() * n);

/** True with probability p. */
export const chance = (r: Rand, p: number): boolean => r() < p;

/** Deterministic 32-bit integers (an LCG), so that a load a test appends can be replayed from its seed. */
export function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x;
  };
}
