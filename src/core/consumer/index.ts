// `gazctl/consumer`: write a Gazette consumer application in TypeScript and run it with
// runConsumer(app), as upstream's runconsumer.Main.

export { runConsumer, runConsumerCommand, type RunConsumerOptions } from './run.js';
export type { Application, Shard, Store, Envelope, MessageDecoder, TxnPublisher, ShardRecorder } from './app.js';
export { CONSUMER_FLAGS, type ConsumerConfig } from './flags.js';
export { sumApp } from './sum-app.js';
