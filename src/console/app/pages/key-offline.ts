// Air-gapped seats on the key page (docs/integrating.md, "Customers without a network"): an activation
// made by exchanging codes with a device that never reaches Keyward is marked, so the vendor knows it
// cannot be released from the device's app and will never show a "last seen".
import { html } from '../ui'

/**
 * What an activation object says about air-gapped activation: the device key that signs its
 * deactivation code (`device_public_key`), or an explicit `offline` flag. A narrow type of its own, so
 * the page reads either without depending on the air-gapped module.
 */
export interface AirGappedFields {
  device_public_key?: string | null
  offline?: boolean
}

export const isAirGapped = (a: AirGappedFields) => a.offline === true || (typeof a.device_public_key === 'string' && a.device_public_key !== '')

/** A badge after the device's name for a seat taken by air-gapped activation; nothing otherwise. */
export function AirGappedMark({ a }: { a: AirGappedFields }) {
  if (!isAirGapped(a)) return null
  return html` <span class="badge offline" title="Activated without a network: the device exchanged codes through an online machine. It releases its seat with a signed deactivation code.">air-gapped</span>`
}
