// Air-gapped seats on the key page (docs/integrating.md, "Customers without a network"): an activation
// made by exchanging codes with a device that never reaches Keyward is marked, so the vendor knows the
// device never validates (its "last seen" is its activation) and gives its seat back with a signed code.
import { html } from '../ui'

/**
 * What an activation object says about air-gapped activation: `offline` is true for a seat taken by a
 * request code. A narrow type of its own, so the page reads it without depending on the air-gapped
 * module (absent from older nodes: no mark).
 */
export interface AirGappedFields {
  offline?: boolean
}

export const isAirGapped = (a: AirGappedFields) => a.offline === true

/** A badge after the device's name for a seat taken by air-gapped activation; nothing otherwise. */
export function AirGappedMark({ a }: { a: AirGappedFields }) {
  if (!isAirGapped(a)) return null
  return html` <span class="badge offline" title="Activated without a network: the device exchanged codes through an online machine. It releases its seat with a signed deactivation code.">air-gapped</span>`
}
