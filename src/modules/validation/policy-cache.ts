// The node's copy of policies (by id), beside the hot keys: a key's hot entry holds its own settings
// and its policy id, and its effective terms are merged from the two (hot-state.ts, applyPolicy). So a
// policy edit is one bus message that drops one entry here, and every key of the policy answers the
// new terms on its next validate: no message and no query per key. The same read-through rules as
// the hot keys (infra/read-through-cache.ts): collapsed loads, a load that an invalidation cancels,
// answers from memory while Postgres is unreachable.
import type { ComponentMatch } from '../../core/component-match'
import type { Entitlements } from '../../core/entitlements'
import type { Bus } from '../../infra/bus'
import type { Sql } from '../../infra/db'
import { ReadThroughCache } from '../../infra/read-through-cache'
import { loadPolicySettings } from '../policies/repo'

/** What validate takes from a policy. */
export interface PolicyTerms {
  plan: string | null
  limit: number
  entitlements: Entitlements
  graceMs: number
  keep: boolean
  oneKeyPerDevice: boolean
  componentMatch: ComponentMatch
  loadedAt: number
}

export class PolicyCache extends ReadThroughCache<PolicyTerms> {
  private held = new Map<string, PolicyTerms>()
  private absent = new Map<string, number>()
  private unsubscribe: () => void = () => {}

  constructor(
    private sql: Sql,
    rules: { ttlMs: number; degradedTtlMs: number; trusted?: (now: number) => boolean },
    bus?: Bus,
  ) {
    super(rules)
    if (bus) {
      this.unsubscribe = bus.subscribe((msg) => {
        if (msg.kind === 'policy') this.invalidate(msg.policyId)
        else if (msg.kind === 'resync') this.clear()
      })
    }
  }

  protected async read(id: string, startedAt: number): Promise<PolicyTerms | null> {
    const p = await loadPolicySettings(this.sql, id)
    if (p === null) return null
    return {
      plan: p.plan,
      limit: p.activation_limit,
      entitlements: Object.freeze(p.entitlements),
      graceMs: p.grace_seconds * 1000,
      keep: p.after_expiry === 'keep',
      oneKeyPerDevice: p.one_key_per_device,
      componentMatch: p.component_match ?? 'off',
      loadedAt: startedAt,
    }
  }

  protected lookup(id: string) {
    return this.held.get(id)
  }

  protected absentSince(id: string) {
    return this.absent.get(id)
  }

  protected keep(id: string, value: PolicyTerms | null, loadedAt: number) {
    if (value === null) {
      this.held.delete(id)
      this.absent.set(id, loadedAt)
    } else {
      this.absent.delete(id)
      this.held.set(id, value)
    }
  }

  protected drop(id: string) {
    this.held.delete(id)
    this.absent.delete(id)
  }

  protected dropAll() {
    this.held.clear()
    this.absent.clear()
  }

  close() {
    this.unsubscribe()
    this.clear()
  }
}
