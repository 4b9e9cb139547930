// What an application author would write: read a license text with nothing but Node's crypto,
// independent of the service's own code, so the tests prove the format is verifiable as documented.
import { createPublicKey, randomBytes, verify } from 'node:crypto'

export interface Envelope {
  enc: string
  sig: string
  alg: string
  kid: string
}

export function envelopeOf(license: string): Envelope {
  const body = license.replace(/-----(BEGIN|END) KEYWARD LICENSE-----/g, '').replace(/\s+/g, '')
  return JSON.parse(Buffer.from(body, 'base64').toString('utf8'))
}

/** The few lines from the README: true when `license` was signed by the key in `publicKeyPem`. */
export function verifiesWith(publicKeyPem: string, license: string): boolean {
  const { enc, sig } = envelopeOf(license)
  return verify(null, Buffer.from(`license/${enc}`), createPublicKey(publicKeyPem), Buffer.from(sig, 'base64'))
}

export function payloadOf(license: string): any {
  return JSON.parse(Buffer.from(envelopeOf(license).enc, 'base64').toString('utf8'))
}

/** Re-wraps an envelope as license text (for tampering tests). */
export function licenseText(envelope: Envelope): string {
  const body = Buffer.from(JSON.stringify(envelope)).toString('base64')
  return `-----BEGIN KEYWARD LICENSE-----\n${body.match(/.{1,64}/g)!.join('\n')}\n-----END KEYWARD LICENSE-----\n`
}

export const fingerprint = () => randomBytes(32).toString('hex')
