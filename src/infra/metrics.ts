// Prometheus metrics (prom-client), one registry per node process. Modules import the metric they
// update; /metrics renders the registry. The hot path counts into plain numbers (tally.ts,
// route-latency.ts) that each metric's `collect` folds in before it is rendered.
import client from 'prom-client'
import { VALIDATE_OUTCOMES } from '../core/outcomes'
import { RouteLatencies } from './route-latency'
import { foldCounts, foldTally, tally } from './tally'

export const registry = new client.Registry()
client.collectDefaultMetrics({ register: registry })

const HTTP_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

/** Latency of the routes served outside the framework (the validate fast path). */
export const fastRouteLatency = new RouteLatencies(HTTP_BUCKETS)

export const httpDuration = new client.Histogram({
  name: 'keyward_http_request_duration_seconds',
  help: 'HTTP request latency by route and status',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: HTTP_BUCKETS,
  registers: [registry],
  collect() {
    fastRouteLatency.foldInto(this)
  },
})

/**
 * Validate answers by outcome, at each outcome's place in VALIDATE_OUTCOMES: counted on the hot path
 * by the engine's one `answered` (modules/validation/service.ts), with the analytics counts.
 */
export const validateOutcomes = new Float64Array(VALIDATE_OUTCOMES.length)

export const validateAnswers = new client.Counter({
  name: 'keyward_validate_answers_total',
  help: `Validate answers by outcome (${VALIDATE_OUTCOMES.join(', ')})`,
  labelNames: ['outcome'] as const,
  registers: [registry],
  collect() {
    foldCounts(validateOutcomes, VALIDATE_OUTCOMES, this, 'outcome')
  },
})

/** Hot-state lookups by result, counted on the hot path. */
export const cacheLookupResults = tally(['hit', 'negative_hit', 'miss', 'stale'])

export const cacheLookups = new client.Counter({
  name: 'keyward_hot_cache_lookups_total',
  help: 'Hot-state lookups by result (hit, miss, negative_hit, stale)',
  labelNames: ['result'] as const,
  registers: [registry],
  collect() {
    foldTally(cacheLookupResults, this, 'result')
  },
})

export const invalidations = new client.Counter({
  name: 'keyward_invalidations_total',
  help: 'Bus invalidations by direction (sent, received, acked, ack_timeout)',
  labelNames: ['direction'] as const,
  registers: [registry],
})

export const busResyncs = new client.Counter({
  name: 'keyward_bus_resyncs_total',
  help: 'Times this node dropped its memory because invalidations may have been missed, by cause',
  labelNames: ['cause'] as const,
  registers: [registry],
})

export const busPublishWait = new client.Histogram({
  name: 'keyward_bus_publish_seconds',
  help: 'How long a write waited for its invalidation to be in force on every node (acks, seen rows, or trust windows run out)',
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5],
  registers: [registry],
})

export const busConnected = new client.Gauge({
  name: 'keyward_bus_connected',
  help: '1 when the invalidation bus is connected (or embedded), 0 when down',
  registers: [registry],
})

export const counterFlushLag = new client.Gauge({
  name: 'keyward_counter_flush_lag_seconds',
  help: 'Seconds since the shared counters were last flushed successfully',
  registers: [registry],
})

export const webhookDeliveries = new client.Counter({
  name: 'keyward_webhook_deliveries_total',
  help: 'Webhook delivery attempts by outcome (success, retry, failed, disabled)',
  labelNames: ['outcome'] as const,
  registers: [registry],
})

export const webhookOwnDeliveries = new client.Counter({
  name: 'keyward_webhook_own_deliveries_total',
  help: "Webhook deliveries a node took from its own transactions at commit, without a claim statement",
  registers: [registry],
})

export const webhookHandedBack = new client.Counter({
  name: 'keyward_webhook_claims_handed_back_total',
  help: 'Claimed webhook deliveries handed back unsent because no slot freed in time (a slow receiver backing up)',
  registers: [registry],
})

export const hookRefusals = new client.Counter({
  name: 'keyward_hook_refusals_total',
  help: 'POST /hooks/:connector_id calls refused before any event was read: unknown_connector, bad_signature, rate_limited',
  labelNames: ['outcome'] as const,
  registers: [registry],
})
