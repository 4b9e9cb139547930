// Connectors' history follows RETENTION_DAYS like events and deliveries: processed inbox rows and
// finished key emails older than that are deleted. Providers redeliver for days, not months (Stripe
// three days, Paddle and Lemon Squeezy less), so the inbox still recognises every redelivery; refusals
// are capped at 50 per connector as they come. A pending email is never deleted.
import { drainBatches } from '../../infra/batches'
import type { Sql } from '../../infra/db'

const BATCH = 500

export async function pruneConnectorHistory(sql: Sql, opts: { days: number; now?: number }): Promise<{ events: number; mails: number }> {
  const cutoff = new Date((opts.now ?? Date.now()) - opts.days * 86_400_000)
  const events = await drainBatches(BATCH, async () => {
    const r = await sql`delete from connector_events where id in (
        select id from connector_events where received_at < ${cutoff} order by received_at limit ${BATCH})`
    return r.count
  })
  const mails = await drainBatches(BATCH, async () => {
    const r = await sql`delete from connector_mails where id in (
        select id from connector_mails where status <> 'pending' and created_at < ${cutoff} order by created_at limit ${BATCH})`
    return r.count
  })
  return { events: events.handled, mails: mails.handled }
}
