import { useState } from 'preact/hooks'
import { apiPath, get, withQuery } from '../api'
import { DailyBars, HBars, StackedDailyBars, type Stack } from '../chart'
import { html, LoadError, num, PageHead, Spinner, useLoad } from '../ui'
import { CreditsChart } from '../credits'
import type { ValidateOutcome } from '../../../core/outcomes'
import type { CountryEntry, Overview as Figures, Range, TrendEntry, ValidationsEntry } from '../../../modules/analytics/model'
import type { ProductList } from '../../../modules/products/model'

/**
 * How each validate outcome is drawn, bottom of the stack first. Keyed by the one outcomes list
 * (core/outcomes.ts), so an outcome added there is not forgotten here: this does not compile until it
 * has a label and a colour.
 */
const DRAWN: Record<ValidateOutcome, { label: string; color: string }> = {
  valid: { label: 'Valid', color: '--c-valid' },
  activation_limit: { label: 'Device limit', color: '--c-limit' },
  expired: { label: 'Expired', color: '--c-expired' },
  suspended: { label: 'Suspended', color: '--c-suspended' },
  entitlements_missing: { label: 'Missing entitlement', color: '--c-entitlements' },
  device_already_used: { label: 'Device used another key', color: '--c-device-used' },
  credits_exhausted: { label: 'Credits exhausted', color: '--c-credits' },
  device_mismatch: { label: 'Device mismatch', color: '--c-device-mismatch' },
  revoked: { label: 'Revoked', color: '--c-revoked' },
  not_found: { label: 'Unknown key', color: '--c-unknown' },
  rate_limited: { label: 'Over daily limit', color: '--c-rate' },
}
const OUTCOMES: Stack[] = Object.entries(DRAWN).map(([key, drawn]) => ({ key, ...drawn }))
/** Neither belongs to a product: with a product filter they are always 0. */
const NO_PRODUCT = new Set<string>(['not_found', 'rate_limited'] satisfies ValidateOutcome[])

const countryName = (() => {
  try {
    const dn = new Intl.DisplayNames(undefined, { type: 'region' })
    return (c: string) => `${dn.of(c) ?? c} (${c})`
  } catch {
    return (c: string) => c
  }
})()

function Card({ label, value, sub }: { label: string; value: string; sub?: string }) {
  return html`<div class="card"><div class="card-label">${label}</div><div class="card-value">${value}</div>${sub ? html`<div class="card-sub">${sub}</div>` : null}</div>`
}

/** Validate calls today against the plan's daily limit (-1: unlimited). */
function Usage({ used, limit }: { used: number; limit: number }) {
  const unlimited = limit < 0
  const pct = unlimited ? 0 : Math.min(100, Math.round((used / Math.max(1, limit)) * 100))
  return html`<div class="card">
    <div class="card-label">Validate calls today</div>
    <div class="card-value">${num(used)}</div>
    ${unlimited
      ? html`<div class="card-sub">Unlimited plan</div>`
      : html`<progress class=${pct >= 90 ? 'hot' : ''} max=${limit} value=${Math.min(used, limit)} aria-label=${`${pct}% of today's limit used`}></progress>
          <div class="card-sub">${pct}% of ${num(limit)} a day (UTC)</div>`}
  </div>`
}

export function Overview() {
  const [range, setRange] = useState<Range>('30d')
  const [product, setProduct] = useState('')
  const overview = useLoad(() => get<Figures>(apiPath`/v1/analytics/overview`), [])
  const products = useLoad(() => get<ProductList>(apiPath`/v1/products`).catch((): ProductList => ({ data: [] })), [])
  const trend = useLoad(() => get<TrendEntry[]>(withQuery(apiPath`/v1/analytics/activations`, { range, product_id: product })), [range, product])
  const outcomes = useLoad(() => get<ValidationsEntry[]>(withQuery(apiPath`/v1/analytics/validations`, { range, product_id: product })), [range, product])
  const geo = useLoad(() => get<CountryEntry[]>(apiPath`/v1/analytics/geography`), [])
  if (overview.error) return html`<${PageHead} title="Overview" /><${LoadError} problem=${overview.error} what="read analytics" />`
  const o = overview.data
  const days = Number(range.replace('d', ''))
  const productName = (products.data?.data ?? []).find((p) => p.id === product)?.name
  return html`<${PageHead} title="Overview" />
    ${!o
      ? html`<${Spinner} />`
      : html`<div class="cards">
          <${Card} label="Active keys" value=${num(o.active_keys)} sub=${`${num(o.total_keys)} keys in all`} />
          <${Card} label="Activations" value=${num(o.total_activations)} sub=${`${num(o.activations_today)} today`} />
          <${Card} label="Expiring within 7 days" value=${num(o.expiring_soon)} />
          <${Usage} used=${o.api_calls_today} limit=${o.api_calls_limit_today} />
        </div>`}
    <section aria-labelledby="trends-h">
      <div class="section-head">
        <h2 id="trends-h">Last ${days} days${productName ? html` · <span class="muted">${productName}</span>` : null}</h2>
        <div class="controls">
          <label class="sr-only" for="chart-product">Product</label>
          <select id="chart-product" value=${product} onChange=${(e: Event) => setProduct((e.target as HTMLSelectElement).value)}>
            <option value="">All products</option>
            ${(products.data?.data ?? []).map((p) => html`<option value=${p.id}>${p.name}</option>`)}
          </select>
          <div class="segmented" role="group" aria-label="Range">
            ${(['7d', '30d', '90d'] as const).map(
              (r) => html`<button type="button" aria-pressed=${range === r} onClick=${() => setRange(r)}>${r.replace('d', ' days')}</button>`,
            )}
          </div>
        </div>
      </div>
      <div class="grid-2 charts">
        <section class="panel" aria-labelledby="val-h">
          <h2 id="val-h">Validations by outcome</h2>
          ${outcomes.error
            ? html`<${LoadError} problem=${outcomes.error} what="read analytics" />`
            : outcomes.data
              ? html`<${StackedDailyBars}
                    label="Validations by outcome"
                    days=${outcomes.data}
                    stacks=${product ? OUTCOMES.filter((s) => !NO_PRODUCT.has(s.key)) : OUTCOMES} />`
              : html`<${Spinner} />`}
        </section>
        <section class="panel" aria-labelledby="cred-h">
          <h2 id="cred-h">Credits consumed per day</h2>
          <${CreditsChart} productId=${product || undefined} range=${range} />
        </section>
        <section class="panel" aria-labelledby="act-h">
          <h2 id="act-h">Activations per day</h2>
          ${trend.error
            ? html`<${LoadError} problem=${trend.error} what="read analytics" />`
            : trend.data
              ? html`<${DailyBars} label="Activations" days=${trend.data.map((d) => ({ date: d.date, value: d.activations }))} />
                  <p class="muted small">${num(trend.data.reduce((s, d) => s + d.activations, 0))} new devices in ${days} days (UTC days).</p>`
              : html`<${Spinner} />`}
        </section>
      </div>
    </section>
    <section class="panel" aria-labelledby="geo-h">
      <h2 id="geo-h">Activations by country</h2>
      ${geo.error
        ? html`<${LoadError} problem=${geo.error} what="read analytics" />`
        : !geo.data
          ? html`<${Spinner} />`
          : geo.data.length === 0
            ? html`<p class="muted empty">No activation with a known country yet.</p>`
            : html`<${HBars} label="Activations by country" rows=${geo.data.slice(0, 12).map((g) => ({ name: countryName(g.country), value: g.activations }))} />
                ${geo.data.length > 12 ? html`<p class="muted small">And ${geo.data.length - 12} more countries.</p>` : null}`}
    </section>`
}
