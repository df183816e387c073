// Messages inside journals: record framings (lines, fixed), how records map to journals, and
// message UUIDs (building, parsing, attaching them to lines of text).
export * from './framing.js';
export * from './mapping.js';
export * from './uuid.js';
export * from './attach-uuids.js';
export * from './sequencer.js';
export * from './checkpoint.js';
export * from './json.js';
export * from './encoder.js';
