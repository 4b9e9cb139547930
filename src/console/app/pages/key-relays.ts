// The key page's relays (docs/api.md, "Relays"): the relays licensed for seats of this key, with their
// use as their check-ins report it, and delete (the seats return to the key).
import { useState } from 'preact/hooks'
import { apiPath, del, get } from '../api'
import { asProblem, html, LoadError, Spinner, useLoad, when } from '../ui'
import type { KeyDetail } from '../../../modules/keys/model'
import type { Relay } from '../../../modules/relays/model'

export function KeyRelays({ k, onChange }: { k: KeyDetail; onChange: () => void }) {
  // The list route carries each relay's lease count and peak; the key detail's own list is the trigger to reload.
  const relays = useLoad(() => get<{ data: Relay[] }>(apiPath`/v1/keys/${k.id}/relays`), [k.id, k.relays.map((r) => `${r.id}:${r.seats}`).join()])
  const [problem, setProblem] = useState<string | null>(null)
  const [busy, setBusy] = useState<string | null>(null)
  const remove = async (r: Relay) => {
    if (!confirm(`Delete the relay ${r.name}? Its ${r.seats} seats return to this key at once; the relay stops answering valid at its next check-in.`)) return
    setProblem(null)
    setBusy(r.id)
    try {
      await del(apiPath`/v1/relays/${r.id}`)
      onChange()
    } catch (err) {
      setProblem(asProblem(err).detail)
    } finally {
      setBusy(null)
    }
  }
  if (k.relays.length === 0) return null
  const seats = k.relays.reduce((n, r) => n + r.seats, 0)
  return html`<section class="panel" aria-labelledby="relays-h">
    <h2 id="relays-h">Relays <span class="muted">(${seats} of ${k.activation_limit} seats)</span></h2>
    <p class="muted">Servers your customer runs on their own network: each hands out its seats as floating leases and checks in here.</p>
    ${problem ? html`<p class="alert" role="alert">${problem}</p>` : null}
    ${relays.error
      ? html`<${LoadError} problem=${relays.error} what="read this key's relays" />`
      : !relays.data
        ? html`<${Spinner} />`
        : html`<div class="table-wrap"><table class="table">
            <thead><tr><th>Relay</th><th class="num">Seats</th><th class="num">Peak (30 days)</th><th class="hide-s">License expires</th><th><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>${relays.data.data.map(
              (r) => html`<tr>
                <td><span title=${r.id}>${r.name}</span><br /><small class="muted">${r.last_check_in_at ? `Checked in ${when(r.last_check_in_at)}` : 'Never checked in'}</small></td>
                <td class="num">${r.seats}</td>
                <td class="num">${r.peak} <span class="muted">of ${r.seats}</span>${r.leases === null ? null : html`<span class="muted hide-s"> · ${r.leases} now</span>`}</td>
                <td class="hide-s">${when(r.expires_at)}</td>
                <td class="row-actions"><button class="btn small danger" type="button" disabled=${busy === r.id} onClick=${() => remove(r)} aria-label=${`Delete relay ${r.name}`}>Delete</button></td>
              </tr>`,
            )}</tbody></table></div>`}
  </section>`
}
