// Messages inside journals: record framings (lines, fixed) and how records map to journals.
export * from './framing.js';
export * from './mapping.js';
