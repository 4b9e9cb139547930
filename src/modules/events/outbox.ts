// The outbox: every state change calls `emit` inside its own transaction, so a change is never
// committed without its event. Delivery (webhooks) reads these rows later.
import type { Tx } from '../../infra/db'
import { newId } from '../../infra/crypto'

export const EVENT_TYPES = [
  'key.created',
  'key.revoked',
  'key.expired',
  'key.extended',
  'activation.created',
  'activation.deactivated',
  'product.created',
  'account.plan_changed',
] as const
export type EventType = (typeof EVENT_TYPES)[number]

export async function emit(tx: Tx, accountId: string, type: EventType, data: unknown): Promise<string> {
  const id = newId('evt')
  await tx`insert into events (id, account_id, type, data) values (${id}, ${accountId}, ${type}, ${tx.json(data as never)})`
  return id
}
