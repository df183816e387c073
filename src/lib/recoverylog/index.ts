// Recovery logs: the format, the playback state machine, hints, playback and prune planning.
export { FRAME_MAGIC, FRAME_HEADER_BYTES, RecoveryLogError, decodeFrames, encodeOpFrame, type ContentChunk, type FrameEvent } from './framing.js';
export { SegmentSet, liveSegments, validateSegment } from './segments.js';
export { decodeHints, encodeHints, emptyHints, validateHints, type DecodeHintsOptions } from './hints.js';
export { FSM, transitioned, type ApplyOutcome, type FnodeState } from './fsm.js';
export {
  playLog,
  playFsm,
  journalLogSource,
  type LogSource,
  type PlayEvent,
  type PlayOptions,
  type PlayResult,
  type PlayedFile,
  type JournalLogSourceOptions,
} from './player.js';
export { MemoryLogSource, type MemoryLogSourceOptions } from './memory-source.js';
export {
  collectLiveSegments,
  LogFragmentPlanner,
  planLogFragments,
  overlaps,
  type ShardHints,
  type CollectedSegments,
  type FragmentDecision,
  type FragmentDecisionKind,
} from './prune.js';
export { LogWriter, commitFrames, takeOver, randomAuthor, authorFence, type RecordedFrame, type LogWriterOptions, type AppendFrames } from './record.js';
export {
  Recorder,
  injectHandoff,
  takeOverLog,
  type TakeOverOptions,
  type TakeOverResult,
  authorFenceLabels,
  PROPERTY_FILES,
  type RecorderOptions,
  type RecorderAppendClient,
  type RecorderAppend,
  type RecorderRetryInfo,
} from './recorder.js';
export { RecordedFs, RecordedFile } from './recorded-fs.js';
