// How a create service takes part in idempotency without knowing HTTP: the idempotency layer
// (http/idempotency.ts) hands the service this function, and the service calls it inside the
// transaction that creates, as that transaction's last write, so the resource and its stored replay
// commit together.
import type { Tx } from './db'

/** Records `body` as the request's stored response in `tx` and returns it; writes nothing outside an idempotent request. */
export type RecordCreated = <T>(tx: Tx, body: T) => Promise<T>
