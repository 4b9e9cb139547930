// The key page's machine identity (docs/integrating.md, "Identifying machines"): the key's
// `component_match` rule, each active device's components (their names, never their hashes, and since
// when each is unchanged), and the device history the rule writes: rebinds (`activation.rebound`
// events) and the copies it refused (`device_mismatch`, counted per product by the validation analytics).
import { useState } from 'preact/hooks'
import { apiPath, get, patch, withQuery } from '../api'
import { Field, FormProblem, html, num, useLoad, useSubmit, when } from '../ui'
import { RULE_HINT, RuleSelect, ruleInWords, type ComponentMatch } from '../component-match'
import type { Activation } from '../../../modules/activations/model'
import type { EventPage } from '../../../modules/events/model'
import type { KeyDetail } from '../../../modules/keys/model'
import type { ValidationsEntry } from '../../../modules/analytics/model'

/**
 * What the server's side of machine identity adds to the activation and the key, read here as
 * optional fields (absent from a node that predates it, which the page then shows as "none sent").
 */
export type IdentifiedActivation = Activation & {
  components?: Record<string, string> | null
  replaced_fingerprints?: string[] | null
  components_changed_at?: string | null
}
type IdentityKey = Omit<KeyDetail, 'activations'> & { activations: IdentifiedActivation[]; component_match?: ComponentMatch }
/** An activation event's data (`activation.created`, `activation.rebound`, ...). */
interface ActivationEvent {
  type: string
  created_at: string
  data: { activation?: IdentifiedActivation; key_id?: string; previous_fingerprint?: string }
}

const LABELS: Record<string, string> = {
  machine_id: 'Machine id',
  board: 'Board',
  disk: 'Disk',
  mac: 'Network cards',
  cpu: 'CPU',
  hostname: 'Host name',
  container: 'Container id',
  browser_id: 'Browser id',
  user_agent: 'Browser',
  platform: 'Platform',
  stored_id: 'Stored id',
}
const short = (fp: string) => `${fp.slice(0, 12)}…`
const ORDER = Object.keys(LABELS)
/** The most stable parts first, as the SDK reads them (the server keeps no order); others by name. */
const ordered = (names: string[]) =>
  names.sort((a, b) => (ORDER.indexOf(a) + 1 || 99) - (ORDER.indexOf(b) + 1 || 99) || a.localeCompare(b))

/**
 * Since when each of the activation's current components is unchanged, as far as the record shows: the
 * components at activation and at each rebind (from the events), then the current set, changed last at
 * `components_changed_at`. A component equal back to the activation is unchanged since `activated_at`;
 * one that differs from the last event is unchanged since the set last changed. Oldest-first events.
 */
export function sinceByComponent(a: IdentifiedActivation, events: readonly ActivationEvent[]): Record<string, string> {
  const current = a.components ?? {}
  const snapshots = events
    .filter((e) => e.data.activation?.id === a.id && (e.type === 'activation.created' || e.type === 'activation.rebound'))
    .map((e) => ({ at: e.type === 'activation.created' ? a.activated_at : e.created_at, components: e.data.activation?.components ?? null }))
  const changedAt = a.components_changed_at ?? a.activated_at
  const last = snapshots[snapshots.length - 1]
  const out: Record<string, string> = {}
  for (const name of Object.keys(current)) {
    // Not as the last record shows it (or nothing recorded): it changed since, at the latest when the set did.
    if (!last || last.components?.[name] !== current[name]) {
      out[name] = changedAt
      continue
    }
    // Walk back from the newest record while it shows the same hash.
    let since = last.at
    for (let i = snapshots.length - 2; i >= 0 && snapshots[i]!.components?.[name] === current[name]; i--) since = snapshots[i]!.at
    out[name] = since
  }
  return out
}

function Rule({ k, onDone }: { k: IdentityKey; onDone: () => void }) {
  const current = k.component_match ?? 'off'
  const [rule, setRule] = useState<ComponentMatch>(current)
  const [saved, setSaved] = useState(false)
  const { busy, problem, submit } = useSubmit(
    () => patch(apiPath`/v1/keys/${k.id}`, { component_match: rule }),
    () => {
      setSaved(true)
      onDone()
    },
  )
  const from = k.policy_id === null ? '' : Object.hasOwn(k.overrides, 'component_match') ? ' Set on this key.' : ' From the policy: a change sets it on this key only.'
  return html`<form class="form" onSubmit=${submit} aria-label="Machine match rule">
    <${Field} label="Machine match (component_match)" id="key-cm" name="component_match" problem=${problem} hint=${RULE_HINT + from}>
      <${RuleSelect} id="key-cm" value=${rule} onChange=${(v: ComponentMatch) => { setSaved(false); setRule(v) }} disabled=${busy} />
    </${Field}>
    <${FormProblem} problem=${problem} fields=${['component_match']} />
    <div class="form-actions">
      <button class="btn primary" type="submit" disabled=${busy || rule === current}>Save rule</button>
      ${saved ? html`<span class="muted small" role="status">Saved: ${ruleInWords(current)}, on every node.</span>` : null}
    </div>
  </form>`
}

export function KeyMachineIdentity({ k: key, onDone }: { k: KeyDetail; onDone: () => void }) {
  const k = key as unknown as IdentityKey
  // The key's activation events (an activation's events match its key): newest first, the latest 100.
  const events = useLoad(async () => {
    const page = await get<EventPage>(withQuery(apiPath`/v1/events`, { resource_id: k.id, page_size: 100 }))
    return (page.data as unknown as ActivationEvent[]).filter((e) => e.type.startsWith('activation.')).reverse()
  }, [k])
  // Refused copies: validate answers device_mismatch, counted per product and day (a plan without
  // analytics, or a node that does not count them yet, shows nothing).
  const refused = useLoad(async () => {
    const days = await get<ValidationsEntry[]>(withQuery(apiPath`/v1/analytics/validations`, { product_id: k.product_id, range: '30d' })).catch(() => null)
    if (!days || !days.every((d) => typeof (d as Record<string, unknown>).device_mismatch === 'number')) return null
    return days.reduce((n, d) => n + ((d as Record<string, unknown>).device_mismatch as number), 0)
  }, [k.product_id])
  const list = events.data ?? []
  const active = k.activations.filter((a) => a.status === 'active')
  const rebinds = list.filter((e) => e.type === 'activation.rebound').reverse()
  return html`<section class="panel" aria-labelledby="ident-h">
    <h2 id="ident-h">Machine identity</h2>
    <p class="muted small">Rule: <strong>${ruleInWords(k.component_match)}</strong>. Devices send salted hashes of their parts (machine id, disk, network cards, CPU, ...): their names are shown here with since when each is unchanged; the values never leave the device.</p>
    <${Rule} k=${k} onDone=${onDone} />
    <h3 class="ident-sub">Components per device</h3>
    ${active.length === 0
      ? html`<p class="muted">No device yet: components appear here once a device validates.</p>`
      : html`<ul class="ident-devices">${active.map((a) => {
          const names = ordered(Object.keys(a.components ?? {}))
          const since = sinceByComponent(a, list)
          return html`<li class="ident-device">
            <div class="ident-name"><strong>${a.device_name ?? short(a.device_fingerprint)}</strong>${a.device_name ? html` <span class="mono muted small" title=${a.device_fingerprint}>${short(a.device_fingerprint)}</span>` : null}</div>
            ${names.length
              ? html`<ul class="ident-parts" aria-label=${`Components of ${a.device_name ?? short(a.device_fingerprint)}`}>${names.map(
                  (n) => html`<li><span class="chip" title=${n}>${LABELS[n] ?? n}</span><span class="muted small" title="Unchanged since">since ${when(since[n])}</span></li>`,
                )}</ul>`
              : html`<p class="muted small">No components sent: an app older than machine identity, or one that sends none${k.component_match && k.component_match !== 'off' ? ' (refused device_mismatch while the rule is on)' : ''}.</p>`}
            ${a.replaced_fingerprints?.length
              ? html`<p class="muted small">Earlier fingerprints (refused from now on): ${a.replaced_fingerprints.map((f) => html`<span class="mono" title=${f}>${short(f)}</span> `)}</p>`
              : null}
          </li>`
        })}</ul>`}
    <h3 class="ident-sub">Rebinds and refused copies</h3>
    ${refused.data !== null && refused.data !== undefined
      ? html`<p class="small" data-testid="refused-copies"><strong>${num(refused.data)}</strong> ${refused.data === 1 ? 'validate was' : 'validates were'} refused as a copy (device_mismatch) in the last 30 days, across this key’s product.</p>`
      : null}
    ${events.error
      ? html`<p class="muted small">The rebinds are in the key’s <a href=${`#/activity?resource_id=${k.id}`}>activity</a>.</p>`
      : rebinds.length === 0
        ? html`<p class="muted small">No rebind: no device has moved to a new fingerprint.</p>`
        : html`<ol class="timeline" aria-label="Rebinds">${rebinds.map((e) => {
            const a = e.data.activation
            const from = e.data.previous_fingerprint ?? ''
            const to = a?.device_fingerprint ?? ''
            return html`<li>${when(e.created_at)}: <strong>${a?.device_name ?? 'a device'}</strong>${' moved from '}<span class="mono" title=${from}>${short(from)}</span>${' to '}<span class="mono" title=${to}>${short(to)}</span>${', same seat '}<span class="badge">rebound</span></li>`
          })}</ol>`}
  </section>`
}
