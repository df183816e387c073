// Helpers for the generated TypeScript enums.

/** Enum name → value tables from a TS numeric enum, without the UNRECOGNIZED sentinel. */
export function enumNames(e: Record<string, string | number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(e)) {
    if (typeof v === 'number' && v >= 0) out[k] = v;
  }
  return out;
}
