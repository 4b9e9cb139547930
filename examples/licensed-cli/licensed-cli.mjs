#!/usr/bin/env node
// A small "licensed app" built on @keyward/client: copy it, change the four constants, ship it.
//
//   licensed-cli activate <KEY>     check the key on this device and remember it
//   licensed-cli run                the app itself: runs only while licensed (grace when offline)
//   licensed-cli devices            the key's devices (this one marked)
//   licensed-cli release <FP|this>  free a device's slot (sign out here, or a lost laptop)
//   licensed-cli offline <FILE>     use an offline license file (no network at all)
//   licensed-cli export <FILE>      a feature of the paid tier: needs the key's `export` entitlement
//   licensed-cli activate-offline <KEY>           activate without internet: prints a request code (and
//                                                 its QR), then reads the response code pasted on stdin
//   licensed-cli activate-offline --response <FILE|->   the response code from a file (or stdin), later
//   licensed-cli deactivate-offline               give the seat back: prints the deactivation code (and QR)
//   licensed-cli deactivate-offline --receipt <FILE|->  check the receipt the online machine gave for it
//   licensed-cli identity           this device's fingerprint and the names of its components
//
// Configuration (environment, so the same file runs against any node): KEYWARD_URL, KEYWARD_TOKEN (a
// `validate` token), KEYWARD_PUBLIC_KEY (the account's root: `public_key` from GET /v1/offline/public-key),
// KEYWARD_PRODUCT_ID; OFFLINE_PAGE_URL (optional: the activation page a QR code opens). State lives in ~/.licensed-cli/ (the key and the last signed answer), or in
// LICENSED_CLI_HOME when set. In a container, set KEYWARD_MACHINE_ID (an id the operator gives the
// workload): the host's identity is not visible there (docs/integrating.md, "Identifying machines").
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { Keyward, KeywardError, OfflineResponseError, fileStorage, machineIdentity } from '@keyward/client'
import { qrText } from '@keyward/client/qr' // needs the optional peer dependency qrcode-generator

const DIR = process.env.LICENSED_CLI_HOME ?? join(homedir(), '.licensed-cli')
mkdirSync(DIR, { recursive: true, mode: 0o700 })
const KEY_FILE = join(DIR, 'key')

// This device: a fingerprint and salted hashes of its parts (machine id, disk, board, network cards,
// CPU, hostname), so the key's component_match rule can tell a reinstall (same parts: the seat follows)
// from a copied disk image (refused `device_mismatch`). Nothing raw leaves the computer.
const identity = await machineIdentity({ productId: process.env.KEYWARD_PRODUCT_ID, storage: fileStorage(join(DIR, 'state.json')) })

const keyward = new Keyward({
  baseUrl: process.env.KEYWARD_URL ?? 'http://localhost:3000',
  token: process.env.KEYWARD_TOKEN ?? '',
  rootPublicKey: process.env.KEYWARD_PUBLIC_KEY ?? '', // the account's root: signing keys it certifies verify too
  productId: process.env.KEYWARD_PRODUCT_ID,
  storage: fileStorage(join(DIR, 'state.json')),
  graceSeconds: 3 * 86_400,
  fingerprint: identity.fingerprint,
  components: identity.components,
})

const savedKey = () => (existsSync(KEY_FILE) ? readFileSync(KEY_FILE, 'utf8').trim() : null)
const fail = (message) => {
  console.error(message)
  process.exit(1)
}

/** The words for a failed call (a KeywardError; anything else is a bug and crashes). */
function problem(err, unreachable = 'the license server cannot be reached: try again when online') {
  if (!(err instanceof KeywardError)) throw err
  const why = {
    unreachable,
    rate_limited: `too many checks today; try again in ${err.retryAfter} s`,
    bad_signature: 'the answer was not signed by the license server: refusing it',
    signing_key_revoked: 'the answer was signed with a key the license server revoked: refusing it',
    clock_skew: err.detail, // the SDK's own sentence: how far off the clock is, and to set it right
    unauthorized: 'this build carries a retired token: please update the app',
    deactivation_limit: 'this key has no device releases left: contact support',
  }
  return why[err.code] ?? `license check failed: ${err.code} ${err.detail} (${err.requestId ?? 'no request id'})`
}

/** What a license unlocks, for the user: `export, projects=5`. */
const features = (r) => Object.entries(r.entitlements).map(([code, value]) => (value === true ? code : `${code}=${value}`)).join(', ')

/** Validates and explains every outcome; the valid result when the app may run (with `require`: only if the key has those entitlements), else null. */
async function licensed(key, require = []) {
  try {
    const r = await keyward.validate({ key, deviceName: `${process.env.USER ?? 'user'}'s computer`, appVersion: '1.0.0', requireEntitlements: require })
    if (r.valid) {
      const unlocked = features(r) ? `, features: ${features(r)}` : ''
      console.log(r.offline ? `licensed (offline, last confirmed ${r.signedAt.toISOString()})` : `licensed: plan ${r.plan ?? '-'}, ${r.activationsUsed}/${r.activationLimit} devices${unlocked}`)
      // Past expires_at but still valid: in the key's grace (renew before it ends), or kept after expiry (no more updates).
      if (r.expired) console.log(r.graceUntil ? `your license expired on ${r.expiresAt.toISOString()}: renew before ${r.graceUntil.toISOString()}` : `updates ended on ${r.expiresAt.toISOString()}: this version keeps working`)
      return r
    }
    const why = {
      not_found: 'this key does not exist: check for typos',
      revoked: 'this key was revoked: contact support',
      suspended: 'this key is suspended: contact support',
      expired: 'this key has expired: renew it',
      activation_limit: 'every device slot is taken: release one with `licensed-cli devices` / `release`',
      device_already_used: 'this computer already used a trial: buy a license to go on',
      entitlements_missing: `your license does not include ${r.missing?.join(', ')}: upgrade it to use this`,
      device_mismatch: 'this computer does not match the one this key was activated on (a copied disk image or virtual machine?): release that device with `licensed-cli devices` / `release`, or contact support',
    }
    console.error(why[r.reason])
    return null
  } catch (err) {
    console.error(problem(err, 'the license server cannot be reached and the grace period is over (or never started)'))
    return null
  }
}

/** All of stdin (a pasted code may span lines; ends at an empty line after some text, or at EOF). */
async function readPasted() {
  let text = ''
  for await (const chunk of process.stdin) {
    text += chunk
    if (/\S[^]*\n\s*\n/.test(text)) break
  }
  return text.trim()
}

/** The text of a file, or of stdin for `-`. */
const readArg = async (file) => (file === '-' ? readPasted() : readFileSync(file, 'utf8').trim())

/**
 * A code to carry to an online machine: as text, and as a QR code for a phone's camera. With
 * OFFLINE_PAGE_URL (your product's page, e.g. https://license.example.com/portal/prod_…/offline) a
 * request code's QR code carries the page's address with the code in its fragment (never sent to a
 * server): the phone opens the page with the code filled in.
 */
function showCode(code, what) {
  console.log(`${what} (${code.length} characters):\n\n${code}\n`)
  const page = process.env.OFFLINE_PAGE_URL
  console.log(qrText(page && code.startsWith('KWREQ1.') ? `${page}#request=${code}` : code))
}

/** Why a response code was refused, for the user (nothing was stored). */
function refusedResponse(err) {
  if (!(err instanceof OfflineResponseError)) return problem(err)
  const why = {
    malformed: 'that is not a response code: copy all of it, starting with KWRES1.',
    no_pending_request: 'this computer is not waiting for a response: run `licensed-cli activate-offline <KEY>` first',
    wrong_request: 'that response answers another request code: use the response to the code this computer printed last',
    wrong_device: 'that response is for another computer',
    wrong_product: 'that response is for another product',
    bad_signature: 'that response is not signed by the license server (or was altered): refusing it',
    signing_key_revoked: 'that response was signed with a key the license server revoked: ask for a new one',
    expired: 'that response has expired: make a new request code',
    clock_set_back: "this computer's clock is wrong: set the date and time right and try again",
  }
  return why[err.reason] ?? `response refused: ${err.reason}`
}

/** Accepts a response code and says what it unlocks. */
async function acceptResponse(response) {
  const r = await keyward.activateOffline(response).catch((err) => fail(refusedResponse(err)))
  console.log(`activated without internet: licensed until ${r.expiresAt.toISOString()} (plan ${r.license.plan ?? '-'}${features(r) ? `, features: ${features(r)}` : ''})`)
}

const [command, arg, arg2] = process.argv.slice(2)
switch (command) {
  case 'activate': {
    if (!arg) fail('usage: licensed-cli activate <KEY>')
    if (await licensed(arg)) writeFileSync(KEY_FILE, arg, { mode: 0o600 })
    else process.exit(1)
    break
  }
  case 'run': {
    // Activated without internet: the stored offline license, checked on this computer alone.
    const stored = savedKey() ? null : await keyward.verifyLicense()
    if (stored?.valid) {
      console.log(`licensed without internet until ${stored.expiresAt.toISOString()}`)
      console.log('Hello from the licensed app.')
      break
    }
    if (stored && stored.reason !== 'malformed') fail(`the offline license is not valid here: ${stored.reason}`)
    const key = savedKey() ?? fail('not activated: licensed-cli activate <KEY>')
    if (!(await licensed(key))) process.exit(1)
    console.log('Hello from the licensed app. (Ctrl-C to quit)')
    // A floating seat is held while the app runs: validate every 5 minutes; stop if the seat is lost.
    const beat = keyward.heartbeat({
      intervalSeconds: Number(process.env.HEARTBEAT_SECONDS ?? 300),
      onLost: (why) => {
        console.error('license lost:', 'reason' in why ? why.reason : why.error.code)
        process.exit(2)
      },
    })
    process.once('SIGINT', async () => {
      await beat.stop()
      process.exit(0)
    })
    break
  }
  case 'devices': {
    const key = savedKey() ?? fail('not activated')
    const d = await keyward.devices({ key }).catch((err) => fail(problem(err)))
    const releases = d.deactivationsAllowed === null ? '' : `, ${Math.max(0, d.deactivationsAllowed - d.deactivationsUsed)} of ${d.deactivationsAllowed} releases left`
    console.log(`${d.activationsUsed}/${d.activationLimit} devices (${d.status}${releases})`)
    for (const dev of d.devices) {
      console.log(`${dev.current ? '*' : ' '} ${dev.fingerprint.slice(0, 12)}…  ${dev.name ?? '(unnamed)'}  last seen ${dev.lastValidatedAt?.toISOString() ?? dev.activatedAt.toISOString()}`)
    }
    break
  }
  case 'release': {
    const key = savedKey() ?? fail('not activated')
    let target
    if (arg && arg !== 'this') {
      // Accept the 12-character prefix that `devices` prints.
      const { devices } = await keyward.devices({ key }).catch((err) => fail(problem(err)))
      target = devices.find((d) => d.fingerprint.startsWith(arg.toLowerCase()))?.fingerprint
      if (!target) fail(`no device starting with ${arg}`)
    }
    // Past the key's deactivations_allowed the service refuses (409 deactivation_limit) and nothing is released.
    const r = await keyward.deactivate(target, { key }).catch((err) => fail(problem(err)))
    console.log(r.deactivated ? `released: ${r.activationsUsed}/${r.activationLimit} devices in use` : 'that device held no slot')
    break
  }
  case 'offline': {
    const r = await keyward.verifyLicense(readFileSync(arg ?? fail('usage: licensed-cli offline <FILE>'), 'utf8'))
    if (r.reason === 'device_mismatch') fail('offline license refused: this computer does not match the one the license was issued to')
    if (!r.valid) fail(`offline license refused: ${r.reason}`)
    console.log(`licensed offline until ${r.expiresAt.toISOString()} (plan ${r.license.plan ?? '-'}${features(r) ? `, features: ${features(r)}` : ''})`)
    break
  }
  case 'export': {
    // A paid feature: the key must carry the `export` entitlement (checked by the service, or by the
    // stored signed answer when offline). Without it the user is told what is missing, nothing is written.
    const key = savedKey() ?? fail('not activated: licensed-cli activate <KEY>')
    const file = arg ?? fail('usage: licensed-cli export <FILE>')
    if (!(await licensed(key, ['export']))) process.exit(1)
    writeFileSync(file, `${JSON.stringify({ exported_at: new Date().toISOString(), projects: [] }, null, 2)}\n`)
    console.log(`exported to ${file}`)
    break
  }
  case 'activate-offline': {
    if (arg === '--response') {
      await acceptResponse(await readArg(arg2 ?? fail('usage: licensed-cli activate-offline --response <FILE|->')))
      break
    }
    if (!arg) fail('usage: licensed-cli activate-offline <KEY> | --response <FILE|->')
    const code = await keyward
      .offlineActivationRequest({ key: arg, deviceName: `${process.env.USER ?? 'user'}'s computer` })
      .catch((err) => fail(err instanceof KeywardError ? `${err.code}: ${err.detail}` : String(err)))
    showCode(code, 'Request code: on a computer with internet, open the activation page your vendor gave you and paste or scan it')
    console.log('Paste the response code here and press Enter twice (or press Ctrl-D and run `licensed-cli activate-offline --response <FILE>` later):')
    const pasted = await readPasted()
    if (!pasted) {
      console.log('waiting for the response code: the request is kept on this computer')
      break
    }
    await acceptResponse(pasted)
    break
  }
  case 'deactivate-offline': {
    if (arg === '--receipt') {
      const receipt = await keyward.verifyReceipt(await readArg(arg2 ?? fail('usage: licensed-cli deactivate-offline --receipt <FILE|->'))).catch((err) => fail(problem(err)))
      console.log(`receipt checked: the license server released activation ${receipt.activationId} at ${receipt.releasedAt.toISOString()}`)
      break
    }
    const code = await keyward.offlineDeactivationRequest().catch((err) =>
      fail(err instanceof KeywardError && err.code === 'not_activated_offline' ? 'this computer was not activated without internet' : problem(err)),
    )
    console.log('This computer no longer holds the license.')
    showCode(code, 'Deactivation code: on a computer with internet, paste or scan it on the activation page to free the seat')
    break
  }
  case 'fingerprint':
    console.log(await keyward.fingerprint())
    break
  case 'identity':
    // Names only: the hashes mean nothing to a user, and the raw values never left the OS.
    console.log(`fingerprint ${identity.fingerprint} (from ${identity.basis})`)
    console.log(`components: ${Object.keys(identity.components).join(', ')}`)
    break
  default:
    console.log('usage: licensed-cli activate <KEY> | run | devices | release <FP|this> | offline <FILE> | export <FILE> | activate-offline <KEY> | activate-offline --response <FILE|-> | deactivate-offline [--receipt <FILE|->] | fingerprint | identity')
}
